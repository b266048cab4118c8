"""`ansible-operator image ...` handlers (the work is in images.py)."""

from __future__ import annotations

import argparse
import sys

from runner.devtools import images


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    image = sub.add_parser(
        "image",
        help="build and push container images with docker, podman or buildah",
        description="Build the runtime and operator images (also without a registry: "
        "BASE_IMAGE=local makes the base from Debian packages) and push them.",
    )
    actions = image.add_subparsers(dest="action", required=True, metavar="ACTION")
    tool_help = f"container tool: {', '.join(images.TOOLS)} (default: docker)"
    build_cmd = actions.add_parser(
        "build", help="build an image with the host's pip access passed as build secrets"
    )
    build_cmd.add_argument("--tool", default="docker", help=tool_help)
    build_cmd.add_argument("-t", "--tag", required=True, help="the image's name")
    build_cmd.add_argument("-f", "--file", default="Dockerfile", help="the Dockerfile")
    build_cmd.add_argument(
        "--build-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"a build argument; BASE_IMAGE={images.LOCAL_BASE} means the Debian base made here",
    )
    build_cmd.add_argument("context", nargs="?", default=".", help="the build context")
    push_cmd = actions.add_parser("push", help="push an image (plain HTTP to a loopback registry)")
    push_cmd.add_argument("--tool", default="docker", help=tool_help)
    push_cmd.add_argument("image")
    base_cmd = actions.add_parser(
        "base", help="make (first time) the Debian base image; print its name"
    )
    base_cmd.add_argument("--tool", default="podman", help=tool_help)
    actions.add_parser(
        "containers-conf",
        help="write the containers.conf podman and buildah need on this machine; print its path",
    )
    image.set_defaults(handler=dispatch)


def dispatch(args: argparse.Namespace) -> int:
    from runner.devtools.cluster import build

    cache = build.cache_root()
    if args.action == "build":
        build_args = {}
        for item in args.build_arg:
            name, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(f"--build-arg {item}: expected NAME=VALUE")
            if value:
                build_args[name] = value
        images.build(
            args.tool,
            tag=args.tag,
            dockerfile=args.file,
            context=args.context,
            cache=cache,
            build_args=build_args,
            progress=_progress,
        )
    elif args.action == "push":
        images.push(args.tool, args.image, cache=cache, progress=_progress)
    elif args.action == "base":
        images.check_tool(args.tool)
        print(images.ensure_base(args.tool, cache, progress=_progress))
    else:
        print(images.write_containers_conf(cache))
    return 0
