# Builds chunkinv._core with the project's own CMake (CHUNKINV_PYTHON=ON),
# for the interpreter that runs pip; metadata is in pyproject.toml.
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        out = build / "python" / "chunkinv"
        build.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                        "-DCHUNKINV_PYTHON=ON", "-DCHUNKINV_CUDA=OFF", "-DBUILD_TESTING=OFF",
                        f"-DPython3_EXECUTABLE={sys.executable}", f"-DCHUNKINV_PYTHON_DIR={out}"], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build), "--target", "chunkinv_python", "-j", jobs], check=True)
        built = next(out.glob("_core*.so"))
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)


setup(ext_modules=[CMakeExtension("chunkinv._core")], cmdclass={"build_ext": CMakeBuild})
