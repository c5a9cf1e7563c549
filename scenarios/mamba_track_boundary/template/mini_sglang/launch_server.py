"""`python -m mini_sglang.launch_server --port P [--track-interval N]`"""

from __future__ import annotations

import argparse
import signal
import sys

from .config import DEFAULT_MAMBA_TRACK_INTERVAL, MODEL_PATH, ServerArgs


def parse_args(argv: list[str] | None = None) -> ServerArgs:
    parser = argparse.ArgumentParser(prog="python -m mini_sglang.launch_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--model-path", default=MODEL_PATH)
    parser.add_argument("--track-interval", dest="track_interval", type=int,
                        default=DEFAULT_MAMBA_TRACK_INTERVAL)
    parser.add_argument("--disable-radix-cache", action="store_true")
    parser.add_argument("--disable-overlap-schedule", action="store_true")
    args = parser.parse_args(argv)
    if args.track_interval < 2:
        parser.error("--track-interval must be at least 2")
    return ServerArgs(host=args.host, port=args.port, model_path=args.model_path,
                      mamba_track_interval=args.track_interval, disable_radix_cache=args.disable_radix_cache,
                      disable_overlap_schedule=args.disable_overlap_schedule)


def main(argv: list[str] | None = None) -> None:
    server_args = parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from .engine import Engine
    from .server import make_server
    from .utils import get_logger

    logger = get_logger("mini_sglang")
    logger.info(f"server_args={server_args}")
    engine = Engine(server_args)
    server = make_server(engine, server_args.host, server_args.port)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logger.info(f"Serving on http://{server_args.host}:{server_args.port}")
    logger.info("The server is fired up and ready to roll!")
    try:
        server.serve_forever(poll_interval=0.1)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
