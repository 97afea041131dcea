"""Child processes the tests interrupt as a user would."""
import signal


def takes_ctrl_c():
    """preexec_fn of a child the test sends SIGINT: it takes it as a terminal's foreground process
    does (Python: KeyboardInterrupt), also when the tests themselves run in the background of a
    shell, whose `&` sets SIGINT to ignored for everything it starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
