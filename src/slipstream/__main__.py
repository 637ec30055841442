from slipstream.cli import main

raise SystemExit(main())
