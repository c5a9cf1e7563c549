"""The CLI as the tests call it."""


def bisect_args(repo, *extra, command=None):
    return [
        "bisect",
        "--repo",
        str(repo.path),
        "--good",
        repo.good,
        "--bad",
        repo.bad,
        *extra,
        "--",
        *(command or repo.command()),
    ]
