from overnight.cli.commands import main

raise SystemExit(main())
