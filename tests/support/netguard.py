"""Tests that must prove they never touch the network use this (it is not a mock: the
models run for real; only the sockets refuse)."""
import socket


class NetworkBlocked(OSError):
    pass


def block_network(mp, attempts: list):
    """Make every socket connection and DNS lookup fail, recording each attempt."""
    def deny(*args, **kwargs):
        attempts.append(args)
        raise NetworkBlocked("network access attempted in a test")

    for obj, name in ((socket.socket, "connect"), (socket.socket, "connect_ex"),
                      (socket, "create_connection"), (socket, "getaddrinfo")):
        mp.setattr(obj, name, deny)
