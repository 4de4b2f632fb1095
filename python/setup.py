"""Builds the API's Python modules from ../proto at install time (protoc and
grpc_python_plugin, Debian's protobuf-compiler and protobuf-compiler-grpc):
the stubs are generated, never written by hand or committed."""

import os
import pathlib
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
PROTOS = ["hetbench/v1/common.proto", "hetbench/v1/agent.proto", "hetbench/v1/coordinator.proto"]


def generate(out_dir):
    proto_dir = pathlib.Path(os.environ.get("HETBENCH_PROTO_DIR", HERE.parent / "proto"))
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if not protoc or not plugin or not (proto_dir / PROTOS[0]).exists():
        raise SystemExit(
            f"hetbench: cannot generate the API modules: protoc={protoc}, grpc_python_plugin={plugin}, "
            f"protos in {proto_dir}; install protobuf-compiler and protobuf-compiler-grpc (scripts/install-deps) "
            "and install from the repository (pip install ./python), or set HETBENCH_PROTO_DIR")
    v1 = pathlib.Path(out_dir) / "hetbench" / "v1"
    v1.mkdir(parents=True, exist_ok=True)
    (v1 / "__init__.py").touch()
    subprocess.run([protoc, f"--proto_path={proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                    f"--plugin=protoc-gen-grpc_python={plugin}", *PROTOS], check=True)


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        generate(self.build_lib)


setup(cmdclass={"build_py": BuildWithStubs})
