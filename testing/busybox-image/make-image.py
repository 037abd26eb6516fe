#!/usr/bin/env python3
"""Writes a one-layer busybox image as a docker-archive tarball (the `docker save` format, which
both `docker load` and containerd's `ctr images import` read) from Debian's busybox-static, for
the tests that run containers under the real containerd and dockerd without a registry.

usage: make-image.py OUT.tar [REPO:TAG]   (default tag: gpud-test/busybox:1)

The layer holds /bin/busybox and links to it for the applets the tests use; the image's command
is `sleep 3600`. The output is byte-for-byte the same on every run (fixed times and owners).
"""
import hashlib
import io
import json
import sys
import tarfile

BUSYBOX = "/bin/busybox"
APPLETS = ["sh", "sleep", "cat", "echo", "true", "false", "ls", "ps", "kill", "env", "id"]


def add(tar, info, data=None):
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def layer_bytes():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for d in ["bin", "etc", "tmp", "proc", "sys", "dev"]:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            add(tar, info)
        with open(BUSYBOX, "rb") as f:
            data = f.read()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        add(tar, info, data)
        for applet in APPLETS:
            info = tarfile.TarInfo("bin/" + applet)
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            info.mode = 0o777
            add(tar, info)
        passwd = b"root:x:0:0:root:/:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        info.mode = 0o644
        add(tar, info, passwd)
    return buf.getvalue()


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = sys.argv[1]
    tag = sys.argv[2] if len(sys.argv) == 3 else "gpud-test/busybox:1"
    try:
        layer = layer_bytes()
    except OSError as e:
        sys.exit(f"make-image: cannot read {BUSYBOX} ({e.strerror}); install busybox-static")
    layer_digest = hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Cmd": ["/bin/sleep", "3600"], "Env": ["PATH=/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_digest]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "testing/busybox-image/make-image.py"}],
    }, sort_keys=True).encode()
    config_digest = hashlib.sha256(config).hexdigest()
    manifest = json.dumps([{
        "Config": config_digest + ".json",
        "RepoTags": [tag],
        "Layers": [layer_digest + "/layer.tar"],
    }]).encode()
    repositories = json.dumps({tag.rsplit(":", 1)[0]: {tag.rsplit(":", 1)[1]: layer_digest}}).encode()
    with tarfile.open(out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo(layer_digest)
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        add(tar, info)
        for name, data in [(layer_digest + "/layer.tar", layer), (config_digest + ".json", config),
                           ("manifest.json", manifest), ("repositories", repositories)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            add(tar, info, data)


if __name__ == "__main__":
    main()
