"""Child processes the tests interrupt as a user would."""


def takes_ctrl_c(argv: list) -> list:
    """argv of a child the test sends SIGINT: it takes it as a terminal's foreground process does
    (Python: KeyboardInterrupt), also when the tests themselves run in the background of a shell,
    whose `&` sets SIGINT to ignored for everything it starts. coreutils' env restores the default
    before it executes the command; a preexec_fn would do it in a fork of the test process, whose
    gRPC threads made such a child abort before its exec ("epoll_wait error: Bad file descriptor",
    seen once in the suite): without one, Python starts the child by vfork, no fork handlers run."""
    return ["env", "--default-signal=INT", *map(str, argv)]
