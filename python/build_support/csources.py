"""Where the C library's sources are, and which files an sdist must carry to build it.

A checkout has them at the repository's root (python/ is one level down); an sdist carries a
copy in csrc/ beside setup.py. Either tree is built with the same Makefile."""
import os

# the folders of the library's sources (the Makefile's LIB_C and LIB_CXX live in these)
LIBRARY_DIRS = ("engine", "weights", "tokenizer", "model", "text", "audio")
SOURCE_SUFFIXES = (".c", ".cc", ".h", ".map")
SDIST_DIR = "csrc"


def is_c_tree(path):
    """Whether path holds the Makefile and the library's header, so make can build there."""
    return all(os.path.isfile(os.path.join(path, f)) for f in ("Makefile", "model/attend.h"))


def find_c_tree(package_root):
    """The folder to run make in: the sdist's csrc/, else the checkout around python/;
    None when there is neither (a copy of python/ alone)."""
    for tree in (os.path.join(package_root, SDIST_DIR), os.path.dirname(package_root)):
        if is_c_tree(tree):
            return tree
    return None


def library_files(tree):
    """The Makefile and every source, header and linker map of the library under tree, as
    paths relative to it (sorted, so an sdist's listing is stable)."""
    files = ["Makefile"]
    for folder in LIBRARY_DIRS:
        for name in sorted(os.listdir(os.path.join(tree, folder))):
            if name.endswith(SOURCE_SUFFIXES):
                files.append(folder + "/" + name)
    return files
