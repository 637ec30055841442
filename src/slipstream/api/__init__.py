"""What a pipeline author imports, and all a pipeline module needs.

- the declarations (api.pipeline): `Pipeline`, `Input`, `Output`, `Param`, `Params` and the
  shortcuts `event_stream`, `duration_param`, `choice_param`, `count_param`,
  `dedup_param`;
- helpers for `build` (api.frames): `watermarked` (and `dedup_difference`), `window_bounds`,
  `not_null`, `check_windows`, and `spark_interval` (a duration as Spark's interval text);
- schemas (api.schema): `parse_ddl`, `check_csv_header`;
- data-quality rules: `Expectation` (counted, dropped to the quarantine, or failing);
- `ConfigError`, for a pipeline's own checks of its parameters and files.

`slipstream.pipelines` offers the same names, beside the built-in pipelines' registry."""

from slipstream.api import frames, pipeline
from slipstream.api.frames import *  # noqa: F403 (build's helpers, frames.__all__)
from slipstream.api.pipeline import *  # noqa: F403 (the declarations, pipeline.__all__)
from slipstream.api.schema import check_csv_header, parse_ddl
from slipstream.errors import ConfigError
from slipstream.ingest.expectations import Expectation

__all__ = [
    *pipeline.__all__,
    *frames.__all__,
    "ConfigError",
    "Expectation",
    "check_csv_header",
    "parse_ddl",
]
