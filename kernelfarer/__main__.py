from kernelfarer.cli import main

raise SystemExit(main())
