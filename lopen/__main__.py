from lopen.cli import main

main()
