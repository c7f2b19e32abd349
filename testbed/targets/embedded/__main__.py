from testbed.targets.embedded.server import main

main()
