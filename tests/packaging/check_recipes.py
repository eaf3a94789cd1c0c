#!/usr/bin/env python3
"""Keeps the Spack and EasyBuild recipes (packaging/) in step with the build they describe.

    check_recipes.py ROOT                 --parse and --cover; exit 1 listing every problem
    check_recipes.py --parse ROOT         each recipe parses (ast; py_compile for Spack's) and
                                          has the keys, names and checks it needs
    check_recipes.py --cover ROOT         every library the build looks for is in DEPENDENCIES,
                                          and every recipe has what DEPENDENCIES maps it to
    check_recipes.py --self-test [ROOT]   plants faults in copies of the inputs and proves each
                                          is reported (exit 1 when one is not)

Neither Spack nor EasyBuild runs here (Spack bootstraps itself from the network): the recipes
are read as the Python they are. What the build looks for is read from every CMakeLists.txt and
cmake/*.cmake (cmake/DljobDependencies.cmake, cmake/DljobCuda.cmake, engine/CMakeLists.txt hold
the libraries): find_package(X), pkg_check_modules(VAR ... module), find_library(VAR NAMES x),
find_path(VAR header), find_program(VAR NAMES x).
"""
import ast
import os
import py_compile
import re
import sys
import tempfile

THIS = "tests/packaging/check_recipes.py"
SPACK_RECIPE = "packaging/spack/packages/dljob/package.py"
EB_DIR = "packaging/easybuild"

# What a recipe must do with a library, by kind:
#   link   every recipe, always (Spack: depends_on with no when=, link type; EasyBuild: in
#          dependencies)
#   build  needed to build only (Spack: depends_on type "build"; EasyBuild: builddependencies)
#   test   the test suites only (Spack: depends_on type "test"; EasyBuild: nothing, its
#          configopts turn DLJOB_BUILD_TESTS off)
#   cuda   the CUDA backend only (Spack: when="+cuda"; EasyBuild: in the -CUDA- easyconfig's
#          dependencies, and not in the others)
#   mpi    dltrain's MPI plugins (Spack: when="+mpi"; EasyBuild: the toolchain, foss, has OpenMPI)
#   none   nothing to package (the C library's, or an optional extra no recipe build uses)
# A Spack or EasyBuild name is a package name ("a|b": either), or
#   "resource:NAME"   Spack: a resource() named NAME, and cmake_args sets the find_path variable
#   "source:FILE"     EasyBuild: FILE among the sources, and configopts set the find_path variable
#   "base:CLASS"      Spack: the package class derives from CLASS (CudaPackage brings cuda)
#   "toolchain:NAME"  EasyBuild: the easyconfig's toolchain is NAME (foss brings OpenMPI)
#   None              nothing in that recipe (kinds none and test)
# "Found by" lists how the build looks for it: "package X" (find_package), "pkg-config M",
# "library L" (find_library's names), "header H" (find_path), "program P"; an empty list marks a
# library the build never looks for but the program needs at run time.
DEPENDENCIES = [
    # (library, found by, kind, Spack, EasyBuild)
    ("Threads", ["package Threads"], "none", None, None),
    ("pkg-config", ["package PkgConfig"], "build", "pkgconfig", "pkgconf"),
    ("yaml-cpp", ["package yaml-cpp"], "link", "yaml-cpp", "yaml-cpp"),
    ("libcurl", ["package CURL"], "link", "curl", "cURL"),
    ("nlohmann_json", ["package nlohmann_json"], "build", "nlohmann-json", "nlohmann_json"),
    ("fmt", ["package fmt"], "link", "fmt", "fmt"),
    ("CLI11", ["package CLI11"], "build", "cli11", "CLI11"),
    ("SQLite", ["package SQLite3"], "link", "sqlite", "SQLite"),
    ("Boost", ["package Boost"], "link", "boost", "Boost"),
    ("libarchive", ["package LibArchive"], "link", "libarchive", "libarchive"),
    ("zlib", ["package ZLIB"], "link", "zlib-api", "zlib"),
    ("libpng", ["package PNG"], "link", "libpng", "libpng"),
    ("libjpeg", ["package JPEG"], "link", "jpeg|libjpeg-turbo", "libjpeg-turbo"),
    ("zstd", ["pkg-config libzstd"], "link", "zstd", "zstd"),
    ("LMDB", ["pkg-config lmdb"], "link", "lmdb", "LMDB"),
    ("LevelDB", ["header leveldb/db.h", "library leveldb"], "link", "leveldb", "LevelDB"),
    ("HDF5", ["pkg-config hdf5-serial", "pkg-config hdf5"], "link", "hdf5", "HDF5"),
    ("protobuf", ["package Protobuf"], "link", "protobuf", "protobuf"),
    ("Nettle", ["pkg-config nettle"], "link", "nettle", "nettle"),
    ("OpenBLAS", ["header cblas.h", "library openblas"], "link", "openblas", "OpenBLAS"),
    ("xxHash", ["header xxhash.h", "library xxhash"], "link", "xxhash", "xxHash"),
    ("kainjow-mustache", ["header kainjow/mustache.hpp"], "build",
     "resource:kainjow-mustache", "source:mustache.hpp"),
    ("GoogleTest", ["package GTest"], "test", "googletest", None),
    ("Python 3", ["package Python3"], "test", "python", None),
    # Optional: the revision `--version` names when the tree is a git checkout.
    ("Git", ["package Git"], "none", None, None),
    ("CUDA Toolkit", ["package CUDAToolkit"], "cuda", "base:CudaPackage", "CUDA"),
    ("cuDNN", ["header cudnn.h", "library cudnn"], "cuda", "cudnn", "cuDNN"),
    # The CUDA plugin opens libnccl.so.2 at run time (engine/src/cuda/nccl_communicator.cu).
    ("NCCL", [], "cuda", "nccl", "NCCL"),
    ("MPI", ["package MPI", "pkg-config ompi-c", "pkg-config mpich"], "mpi", "mpi",
     "toolchain:foss"),
    # Optional: dltrain's Gloo plugin (DLJOB_GLOO, AUTO: built where the stack has Gloo, for ranks
    # without MPI, e.g. Spark's executors); the recipes build with what the site's stack has.
    ("Gloo", ["package Gloo"], "none", None, None),
]
KINDS = ("link", "build", "test", "cuda", "mpi", "none")
# find_package(Boost COMPONENTS x) needs Spack's boost +x (EasyBuild's Boost has every library).
SPACK_VARIANTS_FROM_COMPONENTS = {"Boost"}

# The project options every recipe sets, and those set where the CUDA backend is built.
RECIPE_OPTIONS = ("DLJOB_CUDA", "DLJOB_MPI", "DLJOB_BUILD_TESTS")
CUDA_OPTIONS = ("DLJOB_CUDA_ARCHITECTURES",)

EB_REQUIRED_KEYS = ("easyblock", "name", "version", "homepage", "description", "toolchain",
                    "sources", "builddependencies", "dependencies", "configopts",
                    "sanity_check_paths", "sanity_check_commands", "moduleclass")
# Top-level names eb accepts (the recipes' own helpers are local_*; eb rejects other names).
EB_KNOWN_KEYS = set(EB_REQUIRED_KEYS) | {
    "versionsuffix", "toolchainopts", "source_urls", "checksums", "patches", "github_account",
    "preconfigopts", "prebuildopts", "buildopts", "preinstallopts", "installopts", "build_type",
    "separate_build_dir", "srcdir", "generator", "build_shared_libs", "runtest", "test_cmd",
    "modextravars", "modextrapaths", "cuda_compute_capabilities", "docurls", "start_dir",
    "osdependencies", "allow_system_deps", "parallel", "maxparallel", "unpack_options"}
# The constants easyconfigs use, as eb defines them (the values matter only for our reading).
EB_CONSTANTS = {
    "SYSTEM": {"name": "system", "version": "system"},
    "SHLIB_EXT": "so",
    "SOURCE_TAR_GZ": "%(name)s-%(version)s.tar.gz",
    "SOURCELOWER_TAR_GZ": "%(namelower)s-%(version)s.tar.gz",
    "GITHUB_SOURCE": "https://github.com/%(github_account)s/%(name)s/archive",
    "GITHUB_LOWER_SOURCE": "https://github.com/%(github_account)s/%(namelower)s/archive",
    "PYPI_SOURCE": "https://pypi.python.org/packages/source/%(nameletter)s/%(name)s",
}
EB_EASYBLOCKS = ("CMakeMake", "CMakeNinja")
EB_TOOLCHAIN = {"name": "foss", "version": "2023a"}


class Problems(list):
    def add(self, where, what):
        self.append(f"{where}: {what}")


# ---------------------------------------------------------------------------------------------
# The build: what it looks for.

FIND_COMMANDS = ("find_package", "pkg_check_modules", "pkg_search_module", "find_library",
                 "find_path", "find_file", "find_program")
FIND_KEYWORDS = {
    "NAMES", "NAMES_PER_DIR", "HINTS", "PATHS", "PATH_SUFFIXES", "DOC", "REQUIRED", "ENV",
    "NO_DEFAULT_PATH", "NO_PACKAGE_ROOT_PATH", "NO_CMAKE_PATH", "NO_CMAKE_ENVIRONMENT_PATH",
    "NO_SYSTEM_ENVIRONMENT_PATH", "NO_CMAKE_SYSTEM_PATH", "NO_CMAKE_INSTALL_PREFIX",
    "CMAKE_FIND_ROOT_PATH_BOTH", "ONLY_CMAKE_FIND_ROOT_PATH", "NO_CMAKE_FIND_ROOT_PATH",
    "VALIDATOR", "NO_CACHE", "REGISTRY_VIEW"}
PACKAGE_KEYWORDS = {
    "EXACT", "QUIET", "MODULE", "CONFIG", "NO_MODULE", "REQUIRED", "COMPONENTS",
    "OPTIONAL_COMPONENTS", "GLOBAL", "NO_POLICY_SCOPE", "BYPASS_PROVIDER", "NAMES", "CONFIGS",
    "HINTS", "PATHS", "PATH_SUFFIXES"} | FIND_KEYWORDS
PKG_KEYWORDS = {"REQUIRED", "QUIET", "NO_CMAKE_PATH", "NO_CMAKE_ENVIRONMENT_PATH",
                "IMPORTED_TARGET", "GLOBAL"}


def strip_cmake_comments(text):
    """The text with # comments (line and bracket) blanked, quotes and line numbers kept."""
    out, i, quoted = [], 0, False
    while i < len(text):
        c = text[i]
        if quoted:
            out.append(c)
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                quoted = False
            i += 1
        elif c == '"':
            quoted = True
            out.append(c)
            i += 1
        elif c == "#":
            bracket = re.match(r"#\[(=*)\[", text[i:])
            end = (text.find("]" + bracket.group(1) + "]", i) if bracket else text.find("\n", i))
            end = len(text) if end < 0 else end + (len(bracket.group(1)) + 2 if bracket else 0)
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cmake_calls(text, commands):
    """(command, [args], line) for each call of one of commands, comments ignored."""
    clean = strip_cmake_comments(text)
    pattern = re.compile(r"\b(" + "|".join(commands) + r")\s*\(", re.IGNORECASE)
    for m in pattern.finditer(clean):
        depth, j = 1, m.end()
        while j < len(clean) and depth:
            depth += {"(": 1, ")": -1}.get(clean[j], 0)
            j += 1
        args = [a[1:-1] if a.startswith('"') else a
                for a in re.findall(r'"(?:\\.|[^"\\])*"|[^\s"]+', clean[m.end():j - 1])]
        yield m.group(1).lower(), args, clean.count("\n", 0, m.start()) + 1


def words_after(args, start, keywords):
    out = []
    for a in args[start:]:
        if a in keywords:
            break
        out.append(a)
    return out


def build_finds(cmake_texts):
    """Every lookup the build makes: {key: [(file:line, call, variable, version, components)]}."""
    finds = {}
    for rel in sorted(cmake_texts):
        for command, args, line in cmake_calls(cmake_texts[rel], FIND_COMMANDS):
            if not args:
                continue
            where, call = f"{rel}:{line}", f"{command}({' '.join(args)})"
            keys, var, version, components = [], None, None, []
            if command == "find_package":
                keys = [f"package {args[0]}"]
                if len(args) > 1 and re.fullmatch(r"\d+(\.\d+)*", args[1]):
                    version = args[1]
                for marker in ("COMPONENTS", "REQUIRED"):
                    if marker in args:
                        components += words_after(args, args.index(marker) + 1, PACKAGE_KEYWORDS)
            elif command in ("pkg_check_modules", "pkg_search_module"):
                var = args[0]
                keys = [f"pkg-config {re.split(r'[<>=]', a)[0]}" for a in args[1:]
                        if a not in PKG_KEYWORDS]
            else:
                var = args[0]
                names = (words_after(args, 2, FIND_KEYWORDS) if len(args) > 1 and args[1] == "NAMES"
                         else args[1:2])
                kind = {"find_library": "library", "find_path": "header", "find_file": "header",
                        "find_program": "program"}[command]
                keys = [f"{kind} {' '.join(names)}"]
            for key in keys:
                finds.setdefault(key, []).append(
                    (where, call, var, version, sorted(set(components))))
    return finds


def cmake_facts(cmake_texts):
    """The root project's version, cmake_minimum_required and the cache options declared."""
    facts = {"project_version": None, "cmake_minimum": None, "options": set()}
    root = cmake_texts.get("CMakeLists.txt", "")
    for command, args, _ in cmake_calls(root, ("project", "cmake_minimum_required")):
        if command == "project" and "VERSION" in args:
            facts["project_version"] = args[args.index("VERSION") + 1]
        if command == "cmake_minimum_required" and "VERSION" in args:
            facts["cmake_minimum"] = args[args.index("VERSION") + 1].split("...")[0]
    for text in cmake_texts.values():
        for command, args, _ in cmake_calls(text, ("option", "set")):
            if command == "option" or (len(args) > 2 and "CACHE" in args[1:]):
                facts["options"].add(args[0])
    return facts


# ---------------------------------------------------------------------------------------------
# The Spack recipe.

SPACK_IMPORTS = {("spack_repo.builtin.build_systems.cmake", "CMakePackage"),
                 ("spack_repo.builtin.build_systems.cmake", "generator"),
                 ("spack_repo.builtin.build_systems.cuda", "CudaPackage"),
                 ("spack.package", "*")}


def literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def spack_spec(spec):
    """name, lowest version allowed (or None), variants turned on, of a spec like boost@1.74:+x."""
    name = re.match(r"[A-Za-z0-9_.-]*", spec).group(0)
    version = re.search(r"@([^\s+~%^]+)", spec)
    lower = version.group(1).split(":")[0] or None if version else None
    return name, lower, set(re.findall(r"\+([A-Za-z0-9_-]+)", spec))


def read_spack(text):
    """The recipe as data; raises SyntaxError."""
    tree = ast.parse(text)
    recipe = {"imports": set(), "class": None, "bases": [], "depends": [], "resources": [],
              "versions": [], "generators": [], "variants": {}, "defines": set(),
              "functions": set()}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            recipe["imports"] |= {(node.module, a.name) for a in node.names}
        if isinstance(node, ast.ClassDef):
            recipe["class"] = node.name
            recipe["bases"] = [b.id for b in node.bases if isinstance(b, ast.Name)]
            body = node.body
    if recipe["class"] is None:
        return recipe
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef):
            recipe["functions"].add(stmt.name)
            if stmt.name == "cmake_args":
                for call in ast.walk(stmt):
                    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                            and call.func.attr in ("define", "define_from_variant") and call.args
                            and isinstance(literal(call.args[0]), str)):
                        recipe["defines"].add(literal(call.args[0]))
            continue
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name)):
            continue
        call, directive = stmt.value, stmt.value.func.id
        args = [literal(a) for a in call.args]
        kwargs = {k.arg: literal(k.value) for k in call.keywords}
        if directive == "depends_on" and isinstance(args[0], str):
            types = kwargs.get("type", ("build", "link"))
            name, lower, variants = spack_spec(args[0])
            recipe["depends"].append({
                "name": name, "spec": args[0], "lower": lower, "variants": variants,
                "when": kwargs.get("when"),
                "types": {types} if isinstance(types, str) else set(types),
                "line": stmt.lineno})
        elif directive == "resource":
            recipe["resources"].append(kwargs.get("name"))
        elif directive == "version":
            recipe["versions"].append(args[0])
        elif directive == "generator":
            recipe["generators"] += args
        elif directive == "variant":
            recipe["variants"][args[0]] = kwargs.get("default")
    return recipe


def check_spack_parse(text, project_version, problems):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "package.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            py_compile.compile(path, cfile=os.path.join(tmp, "package.pyc"), doraise=True)
        except py_compile.PyCompileError as e:
            problems.add(SPACK_RECIPE, f"does not compile: {e.msg.strip()}")
            return None
    recipe = read_spack(text)
    for module, name in sorted(SPACK_IMPORTS - recipe["imports"]):
        problems.add(SPACK_RECIPE, f"lacks `from {module} import {name}` (Spack 1.0's layout)")
    if recipe["class"] != "Dljob" or recipe["bases"][:2] != ["CMakePackage", "CudaPackage"]:
        problems.add(SPACK_RECIPE, "needs `class Dljob(CMakePackage, CudaPackage)`, found "
                     f"class {recipe['class']}({', '.join(recipe['bases'])})")
    if "ninja" not in recipe["generators"]:
        problems.add(SPACK_RECIPE, 'lacks generator("ninja")')
    if recipe["variants"].get("mpi") is not True:
        problems.add(SPACK_RECIPE, 'lacks variant("mpi", default=True, ...)')
    if project_version not in recipe["versions"]:
        problems.add(SPACK_RECIPE, f"has no version(\"{project_version}\") (CMakeLists.txt's "
                     f"project() says {project_version}; it has {recipe['versions']})")
    if "cmake_args" not in recipe["functions"]:
        problems.add(SPACK_RECIPE, "has no cmake_args()")
    return recipe


# ---------------------------------------------------------------------------------------------
# The EasyBuild recipes.

def read_easyconfig(text):
    """(top-level names in order, their values); raises SyntaxError, or NameError and others
    when the file uses what EB_CONSTANTS lacks."""
    tree = ast.parse(text)
    names = [t.id for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)]
    scope = dict(EB_CONSTANTS, __builtins__={})
    exec(compile(tree, "<easyconfig>", "exec"), scope)  # pylint: disable=exec-used
    del scope["__builtins__"]
    return names, scope


def eb_deps(values, key):
    return {d[0]: d for d in values.get(key) or [] if isinstance(d, tuple) and d}


def eb_versionsuffix(values):
    suffix = values.get("versionsuffix", "")
    cuda = eb_deps(values, "dependencies").get("CUDA")
    return suffix.replace("%(cudaver)s", cuda[1] if cuda else "?")


def eb_is_cuda(values):
    return "CUDA" in values.get("versionsuffix", "")


def eb_configopts(values):
    return values.get("preconfigopts", "") + " " + values.get("configopts", "")


def check_eb_parse(filename, text, project_version, problems):
    where = f"{EB_DIR}/{filename}"
    try:
        names, values = read_easyconfig(text)
    except SyntaxError as e:
        problems.add(where, f"is not Python: line {e.lineno}: {e.msg}")
        return None
    except Exception as e:  # pylint: disable=broad-except
        problems.add(where, f"cannot be read: {type(e).__name__}: {e} (a constant "
                     "check_recipes.py's EB_CONSTANTS lacks?)")
        return None
    for key in EB_REQUIRED_KEYS:
        if key not in names:
            problems.add(where, f"lacks the easyconfig key {key}")
    for key in names:
        if key not in EB_KNOWN_KEYS and not key.startswith("local_"):
            problems.add(where, f"sets {key}, which is not an easyconfig parameter this check "
                         "knows: eb rejects unknown names (helpers must be local_*)")
    if values.get("easyblock") not in EB_EASYBLOCKS:
        problems.add(where, f"easyblock {values.get('easyblock')!r}: expected one of "
                     f"{EB_EASYBLOCKS}")
    if values.get("name") != "dljob" or values.get("version") != project_version:
        problems.add(where, f"is {values.get('name')} {values.get('version')}, expected dljob "
                     f"{project_version} (CMakeLists.txt's project())")
    if values.get("toolchain") != EB_TOOLCHAIN:
        problems.add(where, f"toolchain {values.get('toolchain')}: expected {EB_TOOLCHAIN}")
    if values.get("moduleclass") != "tools":
        problems.add(where, f"moduleclass {values.get('moduleclass')!r}: expected 'tools'")
    paths = values.get("sanity_check_paths") or {}
    for key, needed in (("files", ["bin/dljob", "bin/dltrain"]), ("dirs", ["lib/dljob"])):
        for path in needed:
            if path not in paths.get(key, []):
                problems.add(where, f"sanity_check_paths['{key}'] lacks {path}")
    for command in ("dljob --version", "dltrain --version"):
        if command not in (values.get("sanity_check_commands") or []):
            problems.add(where, f"sanity_check_commands lack '{command}'")
    if "CUDA" in filename and values.get("versionsuffix") != "-CUDA-%(cudaver)s":
        problems.add(where, "needs versionsuffix = '-CUDA-%(cudaver)s'")
    checksums, sources = values.get("checksums"), values.get("sources") or []
    if isinstance(checksums, list) and len(checksums) != len(sources):
        problems.add(where, f"{len(sources)} sources but {len(checksums)} checksums")
    toolchain = values.get("toolchain") or {}
    expected = (f"{values.get('name')}-{values.get('version')}-{toolchain.get('name')}-"
                f"{toolchain.get('version')}{eb_versionsuffix(values)}.eb")
    if filename != expected:
        problems.add(where, f"eb expects this easyconfig to be named {expected}")
    return values


# ---------------------------------------------------------------------------------------------
# The two checks.

def version_tuple(version):
    return tuple(int(n) for n in re.findall(r"\d+", str(version)))


def load(root):
    """The texts the checks read, relative path -> text, so the self-test can plant faults."""
    cmake = {}
    for top in ("", "cmake", "src", "engine", "tests"):
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "build"))
                                 and d not in ("fixtures", "golden", "__pycache__"))
            if top == "":
                dirnames[:] = []
            for name in sorted(filenames):
                if name == "CMakeLists.txt" or (top == "cmake" and name.endswith(".cmake")):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        cmake[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
    spack_path = os.path.join(root, SPACK_RECIPE)
    spack = open(spack_path, encoding="utf-8").read() if os.path.exists(spack_path) else None
    eb = {}
    eb_dir = os.path.join(root, EB_DIR)
    for name in sorted(os.listdir(eb_dir)) if os.path.isdir(eb_dir) else []:
        if name.endswith(".eb"):
            with open(os.path.join(eb_dir, name), encoding="utf-8") as f:
                eb[name] = f.read()
    return {"cmake": cmake, "spack": spack, "eb": eb}


def parse_check(inputs, problems):
    facts = cmake_facts(inputs["cmake"])
    if facts["project_version"] is None:
        problems.add("CMakeLists.txt", "no project(... VERSION ...) found")
    spack = None
    if inputs["spack"] is None:
        problems.add(SPACK_RECIPE, "is missing")
    else:
        spack = check_spack_parse(inputs["spack"], facts["project_version"], problems)
    ebs = {}
    if not inputs["eb"]:
        problems.add(EB_DIR, "has no .eb easyconfig")
    for filename, text in inputs["eb"].items():
        values = check_eb_parse(filename, text, facts["project_version"], problems)
        if values is not None:
            ebs[filename] = values
    if ebs and not any(eb_is_cuda(v) for v in ebs.values()):
        problems.add(EB_DIR, "has no -CUDA- easyconfig")
    if ebs and all(eb_is_cuda(v) for v in ebs.values()):
        problems.add(EB_DIR, "has no CPU-only easyconfig")
    return facts, spack, ebs


def check_spack_dependency(library, kind, name, finds_of, spack, problems):
    where = f"{SPACK_RECIPE}: {library}"
    if name.startswith("base:"):
        if name[5:] not in spack["bases"]:
            problems.add(SPACK_RECIPE, f"lacks {library}: the class must derive from {name[5:]}")
        return
    if name.startswith("resource:"):
        if name[9:] not in spack["resources"]:
            problems.add(SPACK_RECIPE, f"lacks {library}: expected "
                         f"resource(name=\"{name[9:]}\", ...)")
        for var in {f[2] for f in finds_of if f[2]}:
            if var not in spack["defines"]:
                problems.add(SPACK_RECIPE, f"lacks {library}: cmake_args must define {var} (the "
                             "build's find_path) to where the resource lands")
        return
    deps = [d for d in spack["depends"] if d["name"] in name.split("|")]
    if not deps:
        problems.add(SPACK_RECIPE, f"lacks {library}: expected depends_on(\"{name}\") "
                     f"({kind}; the build: {describe(finds_of)})")
        return
    dep = deps[0]
    when = dep["when"] or ""
    wanted = {"link": ("link", ""), "build": ("build", ""), "test": ("test", None),
              "cuda": (None, "+cuda"), "mpi": (None, "+mpi")}[kind]
    if wanted[0] and wanted[0] not in dep["types"]:
        problems.add(where, f"depends_on(\"{dep['spec']}\") at line {dep['line']} needs type "
                     f"\"{wanted[0]}\" ({kind}), has {sorted(dep['types'])}")
    if wanted[1] == "" and when:
        problems.add(where, f"depends_on(\"{dep['spec']}\") at line {dep['line']} is only "
                     f"when=\"{when}\", but the build always needs it")
    if wanted[1] and wanted[1] not in when:
        problems.add(where, f"depends_on(\"{dep['spec']}\") at line {dep['line']} must be "
                     f"when=\"{wanted[1]}\" ({kind} only), is when={dep['when']!r}")
    for where_found, call, _, version, components in finds_of:
        if version and (dep["lower"] is None
                        or version_tuple(dep["lower"]) < version_tuple(version)):
            problems.add(where, f"depends_on(\"{dep['spec']}\") allows versions older than "
                         f"{version}, which {call} at {where_found} requires")
        for component in components if library in SPACK_VARIANTS_FROM_COMPONENTS else ():
            if component not in dep["variants"]:
                problems.add(where, f"depends_on(\"{dep['spec']}\") lacks +{component}, which "
                             f"{call} at {where_found} requires")


def check_eb_dependency(filename, values, library, kind, name, finds_of, problems):
    where = f"{EB_DIR}/{filename}"
    if name.startswith("toolchain:"):
        if (values.get("toolchain") or {}).get("name") != name[10:]:
            problems.add(where, f"lacks {library}: expected the {name[10:]} toolchain, which "
                         "brings it")
        return
    if name.startswith("source:"):
        sources = [s if isinstance(s, str) else s.get("filename")
                   for s in values.get("sources") or []]
        if name[7:] not in sources:
            problems.add(where, f"lacks {library}: expected {name[7:]} among the sources")
        for var in {f[2] for f in finds_of if f[2]}:
            if f"-D{var}=" not in eb_configopts(values):
                problems.add(where, f"lacks {library}: configopts must set -D{var}= (the "
                             "build's find_path) to where the source is extracted")
        return
    deps, builddeps = eb_deps(values, "dependencies"), eb_deps(values, "builddependencies")
    if kind == "cuda" and not eb_is_cuda(values):
        if name in deps or name in builddeps:
            problems.add(where, f"has {library} ({name}), which only the -CUDA- easyconfig "
                         "should have")
        return
    listed, key = (builddeps, "builddependencies") if kind == "build" else (deps, "dependencies")
    if name not in listed:
        problems.add(where, f"lacks {library}: expected ('{name}', ...) in {key} "
                     f"({kind}; the build: {describe(finds_of)})")
        return
    for where_found, call, _, version, _ in finds_of:
        if version and version_tuple(listed[name][1]) < version_tuple(version):
            problems.add(where, f"{library} {listed[name][1]} is older than {version}, which "
                         f"{call} at {where_found} requires")


def describe(finds_of):
    if not finds_of:
        return "opened at run time, not looked for at build time"
    return ", ".join(f"{call} at {where}" for where, call, *_ in finds_of)


def cover_check(inputs, problems):
    facts, spack, ebs = parse_check(inputs, Problems())
    finds = build_finds(inputs["cmake"])
    table = {}
    for entry in DEPENDENCIES:
        library, found_by, kind = entry[0], entry[1], entry[2]
        if kind not in KINDS:
            problems.add(THIS, f"DEPENDENCIES: {library} has unknown kind {kind}")
        for key in found_by:
            table[key] = library
        if found_by and not any(key in finds for key in found_by):
            problems.add(THIS, f"DEPENDENCIES lists {library} ({', '.join(found_by)}), which the "
                         "build no longer looks for: remove it there and from the recipes")
    # (a) every library the build looks for is in the table.
    for key, found in sorted(finds.items()):
        if key not in table:
            where, call = found[0][0], found[0][1]
            problems.add(where, f"{call}: the build looks for '{key.split(' ', 1)[1]}', which "
                         f"{THIS}'s DEPENDENCIES table does not know: "
                         f"add it there with its Spack and EasyBuild names, then to {SPACK_RECIPE} "
                         f"and {EB_DIR}/*.eb")
    # (b) every recipe has what the table maps each library to.
    for library, found_by, kind, spack_name, eb_name in DEPENDENCIES:
        finds_of = [f for key in found_by for f in finds.get(key, [])]
        if spack is not None and spack_name:
            check_spack_dependency(library, kind, spack_name, finds_of, spack, problems)
        for filename, values in sorted(ebs.items()):
            if eb_name:
                check_eb_dependency(filename, values, library, kind, eb_name, finds_of, problems)
    # CMake itself, and the project options the recipes set.
    minimum = facts["cmake_minimum"]
    if spack is not None:
        cmake = [d for d in spack["depends"] if d["name"] == "cmake"]
        if not cmake or "build" not in cmake[0]["types"]:
            problems.add(SPACK_RECIPE, f"lacks CMake: expected depends_on(\"cmake@{minimum}:\", "
                         "type=\"build\")")
        elif minimum and (cmake[0]["lower"] is None
                          or version_tuple(cmake[0]["lower"]) < version_tuple(minimum)):
            problems.add(SPACK_RECIPE, f"depends_on(\"{cmake[0]['spec']}\") allows a CMake older "
                         f"than CMakeLists.txt's cmake_minimum_required({minimum})")
        check_options(SPACK_RECIPE, spack["defines"], True, facts, problems)
    for filename, values in sorted(ebs.items()):
        where = f"{EB_DIR}/{filename}"
        cmake = eb_deps(values, "builddependencies").get("CMake")
        if not cmake:
            problems.add(where, "lacks CMake in builddependencies")
        elif minimum and version_tuple(cmake[1]) < version_tuple(minimum):
            problems.add(where, f"CMake {cmake[1]} is older than CMakeLists.txt's "
                         f"cmake_minimum_required({minimum})")
        opts = eb_configopts(values)
        check_options(where, set(re.findall(r"-D([A-Za-z0-9_]+)=", opts)), eb_is_cuda(values),
                      facts, problems)
        for option, value in (("DLJOB_CUDA", "ON" if eb_is_cuda(values) else "OFF"),
                              ("DLJOB_BUILD_TESTS", "OFF")):
            if f"-D{option}={value}" not in opts:
                problems.add(where, f"configopts must set -D{option}={value}")


def check_options(where, defined, cuda, facts, problems):
    for option in RECIPE_OPTIONS + (CUDA_OPTIONS if cuda else ()):
        if option not in defined:
            problems.add(where, f"does not set the project option {option}")
    for option in sorted(o for o in defined if o.startswith("DLJOB_")):
        if option not in facts["options"]:
            problems.add(where, f"sets {option}, which the build does not declare (option() or "
                         "set(... CACHE ...)): renamed or removed?")


# ---------------------------------------------------------------------------------------------
# The self-test: each planted fault must be reported.

def planted(inputs, kind, path, old, new):
    """A copy of inputs with old replaced by new in one text (None if old is not there)."""
    copy = {"cmake": dict(inputs["cmake"]), "spack": inputs["spack"], "eb": dict(inputs["eb"])}
    if kind == "spack":
        text = copy["spack"]
    else:
        text = copy[kind].get(path)
    if text is None or old not in text:
        return None
    text = text.replace(old, new, 1)
    if kind == "spack":
        copy["spack"] = text
    else:
        copy[kind][path] = text
    return copy


def line_with(text, needle):
    for line in (text or "").splitlines(keepends=True):
        if needle in line:
            return line
    return "\0 no line has " + needle


def self_test(root):
    inputs = load(root)
    deps_cmake = "cmake/DljobDependencies.cmake"
    cpu_eb = next((n for n in inputs["eb"] if "CUDA" not in n), "")
    cuda_eb = next((n for n in inputs["eb"] if "CUDA" in n), "")
    spack, cmake_text = inputs["spack"], inputs["cmake"].get(deps_cmake, "")
    fmt_line = line_with(cmake_text, "find_package(fmt ")
    cases = [
        # (what, input kind, path, old, new, every word the report must carry)
        ("a library the recipes do not know", "cmake", deps_cmake, cmake_text,
         cmake_text + "\nfind_package(Foo REQUIRED)\n", ["Foo", "DEPENDENCIES"]),
        ("a pkg-config module the recipes do not know", "cmake", deps_cmake, cmake_text,
         cmake_text + "\npkg_check_modules(BAR REQUIRED IMPORTED_TARGET libbar>=1.2)\n",
         ["libbar", "DEPENDENCIES"]),
        ("a find_library the recipes do not know", "cmake", "engine/CMakeLists.txt",
         "\n", "\nfind_library(BAZ_LIBRARY NAMES baz)\n", ["baz", "DEPENDENCIES"]),
        ("Spack recipe without xxhash", "spack", None,
         line_with(spack, 'depends_on("xxhash'), "", [SPACK_RECIPE, "xxHash"]),
        ("EasyBuild recipe without xxHash", "eb", cpu_eb,
         line_with(inputs["eb"].get(cpu_eb), "('xxHash'"), "", [cpu_eb, "xxHash"]),
        ("CUDA easyconfig without cuDNN", "eb", cuda_eb,
         line_with(inputs["eb"].get(cuda_eb), "('cuDNN'"), "", [cuda_eb, "cuDNN"]),
        ("Spack's cuDNN not only +cuda", "spack", None, 'depends_on("cudnn@8:", when="+cuda")',
         'depends_on("cudnn@8:")', [SPACK_RECIPE, "cuDNN", "+cuda"]),
        ("a newer fmt than the recipes allow", "cmake", deps_cmake, fmt_line,
         "find_package(fmt 99 REQUIRED)\n", ["fmt", "99"]),
        ("a project option the recipes set, renamed", "cmake", "engine/CMakeLists.txt",
         'set(DLJOB_MPI "AUTO" CACHE', 'set(DLJOB_MPI_MODE "AUTO" CACHE', ["DLJOB_MPI"]),
        ("an easyconfig without sanity_check_commands", "eb", cpu_eb,
         "sanity_check_commands =", "local_sanity_check_commands =",
         [cpu_eb, "sanity_check_commands"]),
        ("a Spack recipe that is not Python", "spack", None, "def cmake_args(self):",
         "def cmake_args(self)", [SPACK_RECIPE, "compile"]),
    ]
    baseline = Problems()
    cover_check(inputs, baseline)
    parse_check(inputs, baseline)
    failures = []
    for what, kind, path, old, new, words in cases:
        changed = planted(inputs, kind, path, old, new)
        if changed is None:
            failures.append(f"{what}: cannot plant it (the text to change is gone from "
                            f"{path or SPACK_RECIPE}: update the self-test)")
            continue
        found = Problems()
        cover_check(changed, found)
        parse_check(changed, found)
        new_problems = [p for p in found if p not in baseline]
        if not any(all(w in p for w in words) for p in new_problems):
            failures.append(f"{what}: no new problem names {' and '.join(words)}; new problems: "
                            f"{new_problems or 'none'}")
    for f in failures:
        print("self-test FAILED:", f)
    print(f"recipes self-test: {len(cases) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


def main(argv):
    args = argv[1:]
    if args[:1] == ["--self-test"] and len(args) <= 2:
        here = os.path.dirname(os.path.abspath(__file__))
        return self_test(args[1] if len(args) == 2 else os.path.join(here, "..", ".."))
    mode = args[0] if args and args[0] in ("--parse", "--cover") else None
    rest = args[1:] if mode else args
    if len(rest) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    inputs = load(rest[0])
    problems = Problems()
    if mode in (None, "--parse"):
        parse_check(inputs, problems)
    if mode in (None, "--cover"):
        cover_check(inputs, problems)
    for p in problems:
        print(p)
    print(f"recipes{' ' + mode[2:] if mode else ''}: {len(problems)} problem(s) "
          f"({SPACK_RECIPE}, {len(inputs['eb'])} easyconfig(s) in {EB_DIR})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
