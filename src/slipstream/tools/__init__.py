"""Tools around the pipelines: event generators, demos and result views. Each finds the
pipeline it serves by name; no pipeline names a tool."""
