from kbtui.cli import main

main()
