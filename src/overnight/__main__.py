from overnight.cli import main

raise SystemExit(main())
