#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes an OCI image layout from prepared layer blobs and an image config, deterministically.

usage: oci-layout.py OUTDIR --layer FILE [--layer FILE]... [--config-json JSON]
                     [--ref-name NAME] [--tar FILE]

Each --layer FILE is a layer tar, gzip-compressed or not (told by the gzip magic); it is
copied into OUTDIR/blobs/sha256/ under its digest, streamed, never held in memory. Its diff_id
is the sha256 of the uncompressed tar. --config-json is the image config's "config" member
(User, Env, WorkingDir, Cmd...). The layout is oci-layout, index.json -> manifest -> config +
layers, every blob named by its sha256, the same way test/helpers/make-busybox-image writes
one. --tar FILE also writes the layout as a tar (sorted names, fixed mtime, numeric owners).

Prints the manifest digest ("sha256:<hex>") as the last line of stdout.
"""
import argparse
import gzip
import hashlib
import json
import os
import platform
import sys
import tarfile
import tempfile

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
CHUNK = 1 << 20
MT_LAYER_GZ = "application/vnd.oci.image.layer.v1.tar+gzip"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_INDEX = "application/vnd.oci.image.index.v1+json"


def sha256_stream(f):
    h, n = hashlib.sha256(), 0
    for chunk in iter(lambda: f.read(CHUNK), b""):
        h.update(chunk)
        n += len(chunk)
    return h.hexdigest(), n


class Layout:
    def __init__(self, root):
        self.root = root
        self.blobs = os.path.join(root, "blobs", "sha256")
        os.makedirs(self.blobs, exist_ok=True)

    def blob(self, data, media_type, **extra):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.blobs, digest[7:]), "wb") as f:
            f.write(data)
        return dict({"mediaType": media_type, "digest": digest, "size": len(data)}, **extra)

    def json_blob(self, obj, media_type, **extra):
        return self.blob(json.dumps(obj, sort_keys=True).encode(), media_type, **extra)

    def file_blob(self, path, media_type):
        """Copies the file in under its digest; returns its descriptor."""
        with open(path, "rb") as src, \
                tempfile.NamedTemporaryFile(dir=self.blobs, delete=False) as tmp:
            h, n = hashlib.sha256(), 0
            for chunk in iter(lambda: src.read(CHUNK), b""):
                h.update(chunk)
                tmp.write(chunk)
                n += len(chunk)
        os.chmod(tmp.name, 0o644)
        os.replace(tmp.name, os.path.join(self.blobs, h.hexdigest()))
        return {"mediaType": media_type, "digest": "sha256:" + h.hexdigest(), "size": n}

    def write(self, name, obj):
        with open(os.path.join(self.root, name), "w") as f:
            json.dump(obj, f, sort_keys=True)


def layer(layout, path):
    """The layer's descriptor and diff_id (sha256 of the uncompressed tar)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        desc = layout.file_blob(path, MT_LAYER)
        return desc, desc["digest"]
    with gzip.open(path, "rb") as f:
        diff, _ = sha256_stream(f)
    return layout.file_blob(path, MT_LAYER_GZ), "sha256:" + diff


def write_tar(outdir, path, mtime):
    def norm(ti):
        ti.mtime = mtime
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        ti.mode = 0o755 if ti.isdir() else 0o644
        return ti

    names = ["oci-layout", "index.json", "blobs", "blobs/sha256"]
    names += ["blobs/sha256/" + b for b in sorted(os.listdir(os.path.join(outdir, "blobs",
                                                                          "sha256")))]
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tf:
        for n in names:
            tf.add(os.path.join(outdir, n), arcname=n, recursive=False, filter=norm)
    os.replace(tmp, path)


def build(args):
    layout = Layout(args.outdir)
    layers, diff_ids = [], []
    for path in args.layer:
        desc, diff = layer(layout, path)
        layers.append(desc)
        diff_ids.append(diff)
    config = layout.json_blob({
        "architecture": ARCH, "os": "linux",
        "config": json.loads(args.config_json),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }, MT_CONFIG)
    annotations = {"org.opencontainers.image.ref.name": args.ref_name} if args.ref_name else {}
    manifest = layout.json_blob({
        "schemaVersion": 2, "mediaType": MT_MANIFEST, "config": config, "layers": layers,
    }, MT_MANIFEST, platform={"architecture": ARCH, "os": "linux"},
        **({"annotations": annotations} if annotations else {}))
    # Only what index.json names stays: a rebuild in the same directory leaves no stale blobs.
    keep = {d["digest"][7:] for d in layers + [config, manifest]}
    for b in os.listdir(layout.blobs):
        if b not in keep:
            os.unlink(os.path.join(layout.blobs, b))
    layout.write("oci-layout", {"imageLayoutVersion": "1.0.0"})
    layout.write("index.json", {"schemaVersion": 2, "mediaType": MT_INDEX,
                                "manifests": [manifest]})
    if args.tar:
        write_tar(args.outdir, args.tar, int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    print(manifest["digest"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--layer", action="append", required=True)
    p.add_argument("--config-json", default="{}")
    p.add_argument("--ref-name")
    p.add_argument("--tar")
    args = p.parse_args()
    for path in args.layer:
        if not os.path.isfile(path):
            sys.exit(f"oci-layout.py: layer {path} not found")
    build(args)


if __name__ == "__main__":
    main()
