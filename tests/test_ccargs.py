"""Table-driven tests of kernelfarer-cc's command-line parser (kernelfarer.ccargs).

Each case is a real-world compiler command line (from Make's implicit rules, CMake, autotools
and libtool, the Linux kernel's Kbuild, ccache, IDEs...) and what the wrapper must make of it:
the mode, whether it is rewritten (or why not), the C sources, the output, the dependency file
and the flags handed to the rewriter's preprocessor.
"""

from __future__ import annotations

import pytest

from kernelfarer import ccargs
from kernelfarer.ccargs import Form, Mode, Role

REWRITE = None   # expected `passthrough` of a command that is rewritten

# (id, argv, expected): expected keys are Command attributes, plus "sources" (paths of the C
# inputs), "depfile" (Command.dependency_file of the first C input) and "why" (a substring of
# `passthrough`, or REWRITE).
CASES = [
    ("make-implicit-compile", ["-O2", "-c", "-o", "foo.o", "foo.c"],
     dict(mode=Mode.COMPILE, why=REWRITE, sources=["foo.c"], output="foo.o", cppflags=["-O2"])),
    ("make-implicit-link", ["-O2", "main.o", "util.o", "-o", "prog", "-lm"],
     dict(mode=Mode.LINK, why="no C source", sources=[])),
    ("make-compile-and-link", ["-O2", "-Wall", "prog.c", "-o", "prog", "-lm"],
     dict(mode=Mode.LINK, why=REWRITE, sources=["prog.c"], output="prog")),
    ("cmake-makefiles", ["-DFOO=1", "-I/src/include", "-isystem", "/opt/inc", "-O3", "-DNDEBUG",
                         "-std=gnu11", "-MD", "-MT", "CMakeFiles/t.dir/k.c.o", "-MF",
                         "CMakeFiles/t.dir/k.c.o.d", "-o", "CMakeFiles/t.dir/k.c.o", "-c",
                         "/src/k.c"],
     dict(mode=Mode.COMPILE, why=REWRITE, sources=["/src/k.c"], output="CMakeFiles/t.dir/k.c.o",
          depfile="CMakeFiles/t.dir/k.c.o.d",
          cppflags=["-DFOO=1", "-I/src/include", "-isystem", "/opt/inc", "-O3", "-DNDEBUG",
                    "-std=gnu11"])),
    ("cmake-ninja", ["-DNDEBUG", "-O3", "-fPIE", "-MD", "-MT", "t/k.c.o", "-MF", "t/k.c.o.d",
                     "-o", "t/k.c.o", "-c", "../k.c"],
     dict(mode=Mode.COMPILE, why=REWRITE, sources=["../k.c"], depfile="t/k.c.o.d",
          cppflags=["-DNDEBUG", "-O3", "-fPIE"])),
    ("automake-libtool", ["-DHAVE_CONFIG_H", "-I.", "-I..", "-g", "-O2", "-MT", "foo.lo", "-MD",
                          "-MP", "-MF", ".deps/foo.Tpo", "-c", "foo.c", "-fPIC", "-DPIC", "-o",
                          ".libs/foo.o"],
     dict(mode=Mode.COMPILE, why=REWRITE, output=".libs/foo.o", depfile=".deps/foo.Tpo",
          cppflags=["-DHAVE_CONFIG_H", "-I.", "-I..", "-O2", "-fPIC", "-DPIC"])),
    ("kbuild-wp-md", ["-Wp,-MMD,drivers/x/.y.o.d", "-nostdinc", "-c", "-o", "y.o", "y.c"],
     dict(mode=Mode.COMPILE, why="-Wp,")),
    ("fedora-wp-defines", ["-O2", "-Wp,-D_FORTIFY_SOURCE=2", "-Wp,-U_X,-DN=3", "-c", "x.c"],
     dict(mode=Mode.COMPILE, why=REWRITE,
          cppflags=["-O2", "-Wp,-D_FORTIFY_SOURCE=2", "-Wp,-U_X,-DN=3"])),
    ("wp-define-and-dependency", ["-Wp,-DN=3,-MD,x.d", "-c", "x.c"], dict(why="-Wp,")),
    ("preprocess", ["-E", "-P", "-"], dict(mode=Mode.PREPROCESS, why="preprocess")),
    ("preprocess-to-file", ["-E", "foo.c", "-o", "foo.i"],
     dict(mode=Mode.PREPROCESS, why="preprocess", sources=["foo.c"])),
    ("deps-only-M", ["-M", "foo.c"], dict(mode=Mode.PREPROCESS, why="preprocess")),
    ("deps-only-MM", ["-MM", "-MG", "-I", "inc", "foo.c"], dict(mode=Mode.PREPROCESS)),
    ("assembly", ["-S", "-O2", "foo.c"], dict(mode=Mode.ASSEMBLY, why="-S")),
    ("syntax-only", ["-fsyntax-only", "-Wall", "foo.c"], dict(mode=Mode.SYNTAX_ONLY, why="syntax")),
    ("version", ["--version"], dict(why="--version")),
    ("verbose", ["-v"], dict(why="-v")),
    ("driver-dry-run", ["-###", "-c", "x.c"], dict(why="-###")),
    ("print-file-name", ["-print-file-name=libc.so"], dict(why="-print-file-name")),
    ("print-prog-name", ["--print-prog-name=ld"], dict(why="--print-prog-name")),
    ("dumpmachine", ["-dumpmachine"], dict(why="-dumpmachine")),
    ("dump-defines", ["-dD", "-E", "x.c"], dict(why="-dD")),
    ("stdin", ["-x", "c", "-c", "-", "-o", "x.o"], dict(why="standard input")),
    ("cxx-source", ["-c", "x.cpp", "-o", "x.o"], dict(why="no C source", sources=[])),
    ("x-cxx-overrides-extension", ["-x", "c++", "-c", "x.c"], dict(why="no C source")),
    ("x-c-any-extension", ["-x", "c", "-c", "kernel.inc"],
     dict(why=REWRITE, sources=["kernel.inc"])),
    ("x-joined", ["-xc", "-c", "k.txt"], dict(why=REWRITE, sources=["k.txt"])),
    ("x-none-resets", ["-x", "c++", "a.c", "-x", "none", "b.c", "-c"],
     dict(why=REWRITE, sources=["b.c"])),
    ("assembler", ["-c", "start.S", "-o", "start.o"], dict(why="no C source")),
    ("mixed-languages", ["-c", "a.c", "b.s", "c.cpp"], dict(why=REWRITE, sources=["a.c"])),
    ("precompiled-header", ["-x", "c-header", "pch.h", "-o", "pch.h.gch"],
     dict(why="no C source")),
    ("header-with-c", ["-c", "a.c", "foo.h"], dict(why="header")),
    ("unknown-long-option", ["--frobnicate", "-c", "x.c"], dict(why="--frobnicate")),
    ("unknown-short-option", ["-Zfoo", "-c", "x.c"], dict(why="-Zfoo")),
    ("missing-argument", ["-c", "x.c", "-o"], dict(why="lacks its argument")),
    ("output-joined", ["-c", "x.c", "-ox.o"], dict(why=REWRITE, output="x.o")),
    ("cpp-flag-spellings", ["-Iinc", "-I", "inc2", "-D", "A=1", "-DB", "-UC", "-iquote", "q",
                            "-idirafter", "late", "-include", "config.h", "-imacros", "m.h",
                            "-c", "x.c"],
     dict(why=REWRITE, cppflags=["-Iinc", "-I", "inc2", "-D", "A=1", "-DB", "-UC", "-iquote",
                                 "q", "-idirafter", "late", "-include", "config.h", "-imacros",
                                 "m.h"])),
    ("isa-flags", ["-march=native", "-mavx2", "-mfma", "-mtune=generic", "-mno-red-zone", "-c",
                   "x.c"],
     dict(why=REWRITE, cppflags=["-march=native", "-mavx2", "-mfma"])),
    ("mllvm-takes-next-word", ["-mllvm", "-x", "-c", "x.c"],
     dict(why=REWRITE, sources=["x.c"], cppflags=[])),
    ("xclang-plugin", ["-Xclang", "-load", "-Xclang", "plugin.so", "-c", "x.c"],
     dict(why=REWRITE, sources=["x.c"])),
    ("xlinker", ["x.c", "-Xlinker", "--gc-sections", "-o", "x"], dict(mode=Mode.LINK, why=REWRITE)),
    ("wl-rpath", ["x.c", "-Wl,-rpath,/opt/lib", "-L/opt/lib", "-lfoo", "-o", "x"],
     dict(mode=Mode.LINK, why=REWRITE, sources=["x.c"])),
    ("md-no-output", ["-MD", "-c", "src/x.c"], dict(why=REWRITE, depfile="x.d")),
    ("mmd-with-output", ["-MMD", "-c", "x.c", "-o", "obj/x.o"], dict(depfile="obj/x.d")),
    ("md-output-without-extension", ["-MD", "-c", "x.c", "-o", "out/x"], dict(depfile="out/x.d")),
    ("md-dotted-directory", ["-MD", "-c", "x.c", "-o", "a.b/x"], dict(depfile="a.b/x.d")),
    ("md-multiple-dots", ["-MD", "-c", "x.c", "-o", "k.c.o"], dict(depfile="k.c.d")),
    ("mf-joined", ["-MMD", "-MFdeps/x.d", "-c", "x.c"], dict(depfile="deps/x.d")),
    ("no-depfile", ["-c", "x.c"], dict(depfile=None)),
    ("compilation-database", ["-MJ", "x.json", "-c", "x.c"], dict(why="-MJ")),
    ("depfile-when-linking", ["-MD", "x.c", "-o", "x"], dict(why="dependency file")),
    ("depfile-several-inputs", ["-MD", "-c", "a.c", "b.c"], dict(why="dependency file")),
    ("output-several-inputs", ["-c", "a.c", "b.c", "-o", "ab.o"], dict(why="several inputs")),
    ("several-inputs", ["-c", "a.c", "b.c"], dict(why=REWRITE, sources=["a.c", "b.c"])),
    ("end-of-options", ["-c", "--", "-weird.c"],
     dict(why=REWRITE, sources=["-weird.c"], end_of_options=1)),
    ("prefix-maps", ["-ffile-prefix-map=/src=.", "-fdebug-prefix-map=/b=/c",
                     "-fmacro-prefix-map=/m=/n", "-c", "x.c"],
     dict(why=REWRITE, debug_maps=[("/src", "."), ("/b", "/c")],
          macro_maps=[("/src", "."), ("/m", "/n")])),
    ("bare-O-and-g", ["-O", "-g", "-c", "x.c"], dict(why=REWRITE, cppflags=["-O"])),
    ("split-include-path", ["-I-", "-c", "x.c"], dict(why="-I-")),
    ("no-inputs", ["-c"], dict(why="no input files")),
    ("cross-target", ["--target=aarch64-linux-gnu", "-target", "aarch64-linux-gnu", "-c", "x.c"],
     dict(why=REWRITE, cppflags=["--target=aarch64-linux-gnu", "-target", "aarch64-linux-gnu"])),
    ("standards", ["-std=c99", "-pedantic", "-ansi", "-c", "x.c"],
     dict(why=REWRITE, cppflags=["-std=c99", "-ansi"])),
    ("openmp", ["-fopenmp", "-fopenmp=libomp", "-pthread", "-c", "x.c"],
     dict(why=REWRITE, cppflags=["-fopenmp", "-pthread"])),
    ("linker-entry", ["-e", "start", "-nostdlib", "x.c", "-o", "x"],
     dict(mode=Mode.LINK, why=REWRITE, sources=["x.c"])),
    ("assembler-options", ["-Wa,--noexecstack", "-c", "x.c"], dict(why=REWRITE)),
    ("save-temps", ["-save-temps=obj", "-c", "x.c", "-o", "o/x.o"], dict(why=REWRITE)),
    ("ccache-adds-color", ["-fdiagnostics-color", "-c", "x.c"], dict(why=REWRITE)),
    ("sanitizers-and-coverage", ["-fsanitize=address,undefined", "--coverage", "-c", "x.c"],
     dict(why="--coverage")),
    ("coverage-spelled-out", ["-fprofile-arcs", "-ftest-coverage", "-c", "x.c"],
     dict(why="-fprofile-arcs")),
    ("clang-coverage", ["-fprofile-instr-generate", "-fcoverage-mapping", "-c", "x.c"],
     dict(why="-fcoverage-mapping")),
    ("lto", ["-flto=thin", "-O2", "-c", "x.c"], dict(why=REWRITE)),
    ("sysroot", ["--sysroot=/opt/sys", "-isysroot", "/opt/sys2", "-c", "x.c"],
     dict(why=REWRITE, cppflags=["--sysroot=/opt/sys", "-isysroot", "/opt/sys2"])),
    ("preprocessed-input", ["-fpreprocessed", "-c", "x.i"], dict(why="-fpreprocessed")),
    ("x-cpp-output", ["-c", "x.i"], dict(why="no C source")),
]


@pytest.mark.parametrize("argv, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_command_lines(argv, expected):
    cmd = ccargs.parse(argv)
    for key, want in expected.items():
        if key == "why":
            if want is REWRITE:
                assert cmd.passthrough is None, cmd.passthrough
            else:
                assert cmd.passthrough is not None and want in cmd.passthrough, cmd.passthrough
        elif key == "sources":
            assert [i.path for i in cmd.c_sources] == want
        elif key == "depfile":
            assert cmd.dependency_file(cmd.c_sources[0]) == want
        else:
            assert getattr(cmd, key) == want, key


def test_assembly_is_rewritten_when_asked():
    assert ccargs.parse(["-S", "x.c"]).passthrough is not None
    assert ccargs.parse(["-S", "x.c"], allow_assembly=True).passthrough is None


def test_input_positions_point_into_the_expanded_arguments(tmp_path):
    rsp = tmp_path / "args.rsp"
    rsp.write_text('-O2 -c\n"my file.c" -o \'out dir/x.o\' -DMSG=\\"hi\\"\n')
    cmd = ccargs.parse(["-g", f"@{rsp}", "-Wall"])
    assert cmd.response_file
    assert cmd.args == ["-g", "-O2", "-c", "my file.c", "-o", "out dir/x.o", '-DMSG="hi"', "-Wall"]
    [src] = cmd.c_sources
    assert cmd.args[src.index] == "my file.c" and cmd.output == "out dir/x.o"
    assert cmd.passthrough is None


def test_nested_response_files(tmp_path):
    (tmp_path / "inner.rsp").write_text("-DINNER=1 -c k.c")
    (tmp_path / "outer.rsp").write_text(f"-O3 @{tmp_path / 'inner.rsp'}")
    cmd = ccargs.parse([f"@{tmp_path / 'outer.rsp'}"])
    assert cmd.args == ["-O3", "-DINNER=1", "-c", "k.c"]
    assert cmd.cppflags == ["-O3", "-DINNER=1"]


def test_a_missing_response_file_is_a_plain_word():
    cmd = ccargs.parse(["@does-not-exist.rsp", "-c", "x.c"])
    assert not cmd.response_file
    assert [i.path for i in cmd.inputs] == ["@does-not-exist.rsp", "x.c"]


def test_unterminated_quote_in_a_response_file(tmp_path):
    (tmp_path / "bad.rsp").write_text('-c "x.c')
    with pytest.raises(ccargs.CommandLineError):
        ccargs.parse([f"@{tmp_path / 'bad.rsp'}"])


@pytest.mark.parametrize("word", ["plain", "with space", "tab\there", "quote\"d", "it's",
                                  "back\\slash", "", "-DX=\"a b\"", "new\nline"])
def test_response_file_words_round_trip(word):
    text = " ".join(ccargs.quote_response_word(w) for w in ["-c", word, "x.c"])
    assert ccargs.split_response_file(text) == ["-c", word, "x.c"]


@pytest.mark.parametrize("word, spelling, form", [
    ("-MD", "-MD", Form.FLAG),
    ("-MF", "-MF", Form.JOINED_OR_SEPARATE),
    ("-MFx.d", "-MF", Form.JOINED_OR_SEPARATE),
    ("-mllvm", "-mllvm", Form.SEPARATE),
    ("-march=znver4", "-march=", Form.JOINED),
    ("-mavx512f", "-mavx", Form.FAMILY),
    ("-mno-red-zone", "-m", Form.FAMILY),
    ("-fdebug-prefix-map=/a=/b", "-fdebug-prefix-map=", Form.JOINED),
    ("-fsyntax-only", "-fsyntax-only", Form.FLAG),
    ("-fno-strict-aliasing", "-f", Form.FAMILY),
    ("-Wl,--as-needed", "-Wl,", Form.JOINED),
    ("-Wp,-MD,x.d", "-Wp,", Form.JOINED),
    ("-Werror", "-W", Form.FAMILY),
    ("-emit-llvm", "-emit-llvm", Form.FLAG),
    ("-iwithprefixbefore", "-iwithprefixbefore", Form.JOINED_OR_SEPARATE),
    ("-isystem/usr/x", "-isystem", Form.JOINED_OR_SEPARATE),
    ("-g", "-g", Form.FAMILY),
    ("-gdwarf-5", "-g", Form.FAMILY),
])
def test_lookup_prefers_exact_then_longest_prefix(word, spelling, form):
    flag = ccargs.lookup(word)
    assert flag is not None and (flag.spelling, flag.form) == (spelling, form)


def test_the_table_has_no_duplicate_spellings():
    seen = set()
    for flag in ccargs.FLAGS:
        key = (flag.spelling, flag.form is Form.FAMILY)
        assert key not in seen, flag.spelling
        seen.add(key)


def test_every_pass_through_role_is_explained():
    for argv in (["-v"], ["-MJ", "x", "-c", "x.c"], ["-Xpreprocessor", "-MD", "-c", "x.c"]):
        cmd = ccargs.parse(argv)
        assert cmd.passthrough and cmd.passthrough.startswith("option "), argv
    assert ccargs.lookup("-c").role is Role.COMPILE


@pytest.mark.parametrize("flags, expected", [
    ([], "x86-auto"),
    (["--target=aarch64-linux-gnu"], "neon"),
    (["-target", "powerpc64le-linux-gnu"], "power10-mma"),
    (["--target=x86_64-linux-gnu"], "x86-auto"),
    (["--target=riscv64-linux-gnu"], "generic"),
])
def test_build_target_follows_the_compilers_target_triple(flags, expected):
    import platform
    from kernelfarer.cc import default_build_target
    if platform.machine() != "x86_64":
        pytest.skip("expectations written for an x86-64 build host")
    assert default_build_target(flags) == expected
