from scratchpad.cli import main

main()
