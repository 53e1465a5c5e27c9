from memtop.cli import main

raise SystemExit(main())
