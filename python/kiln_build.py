"""A PEP 517 build backend for the kiln package, in the tree (pyproject.toml:
backend-path): the package is pure Python, so a wheel is a zip of kiln/ with
its metadata. Needs nothing to be installed or downloaded, so `pip install
./python` works offline and without setuptools or wheel."""
import base64
import hashlib
import os
import zipfile

NAME, VERSION = "kiln", "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "py3-none-any"


def _metadata():
    summary = "Kiln from Python: compile transformer layers into fused CUDA kernels and run them on DLPack tensors"
    readme = open(os.path.join(HERE, "README.md")).read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, summary, readme))


def _files():
    pkg = os.path.join(HERE, NAME)
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py") or f.startswith("libkiln.so"):
            yield "%s/%s" % (NAME, f), open(os.path.join(pkg, f), "rb").read()


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, "%s-%s.dist-info" % (NAME, VERSION))
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "METADATA"), "w").write(_metadata())
    open(os.path.join(d, "WHEEL"), "w").write("Wheel-Version: 1.0\nGenerator: kiln_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG)
    return os.path.basename(d)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    info = "%s-%s.dist-info" % (NAME, VERSION)
    entries = list(_files())
    entries.append(("%s/METADATA" % info, _metadata().encode()))
    entries.append(("%s/WHEEL" % info,
                    ("Wheel-Version: 1.0\nGenerator: kiln_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG).encode()))
    record = [_record_line(n, d) for n, d in entries] + ["%s/RECORD,," % info]
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in entries:
            z.writestr(n, d)
        z.writestr("%s/RECORD" % info, "\n".join(record) + "\n")
    return name
