"""Pluto-style tiling (transforms/tiling.py, kernelfarer/plutostyle.py): the isl transform on its
own, the loop structure it generates, and the tiled code's results against the original nest on
odd sizes (through compare's harness: the same arrays of small integers, compared exactly)."""

from __future__ import annotations

import islpy as isl
import pytest
from pycparser import c_ast, c_parser

from kernelfarer import compare
from kernelfarer.plutostyle import NotApplicable, PlutoOptions, tile_nest
from kernelfarer.transforms import tiling

GEMM_DOMAIN = "[M, N, K] -> { S[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }"
IDENTITY = "[M, N, K] -> { S[i, j, k] -> [i, j, k, 0] }"
READS = "[M, N, K] -> { S[i, j, k] -> C[i, j]; S[i, j, k] -> A[i, k]; S[i, j, k] -> B[k, j] }"
WRITES = "[M, N, K] -> { S[i, j, k] -> C[i, j] }"


def gemm_dependences():
    return tiling.dependences(domain=isl.UnionSet(GEMM_DOMAIN), schedule=isl.UnionMap(IDENTITY),
                              reads=isl.UnionMap(READS), writes=isl.UnionMap(WRITES))


# -- the isl transform ---------------------------------------------------------------------------

def test_gemm_band_is_permutable_and_only_k_carries_a_dependence():
    deps = gemm_dependences()
    assert not deps.is_empty()
    schedule = isl.UnionMap(IDENTITY)
    assert tiling.is_permutable(schedule=schedule, band_dims=3, dependences=deps)
    assert tiling.carried(schedule=schedule, band_dims=3, dependences=deps) == (False, False, True)


def test_intra_tile_order_puts_the_stride_one_parallel_loop_innermost():
    deps = gemm_dependences()
    accesses = isl.UnionMap(READS).union(isl.UnionMap(WRITES))
    order = tiling.intra_tile_order(schedule=isl.UnionMap(IDENTITY), band_dims=3,
                                    accesses=accesses, dependences=deps)
    assert order == (0, 2, 1)          # i k j: j walks C and B with stride 1 and carries nothing


def test_a_skewed_dependence_is_not_permutable():
    # for i for j: A[i][j] = A[i-1][j+1]: distance (1, -1)
    domain = isl.UnionSet("[N] -> { S[i, j] : 1 <= i < N and 0 <= j < N - 1 }")
    schedule = isl.UnionMap("[N] -> { S[i, j] -> [i, j, 0] }")
    deps = tiling.dependences(domain=domain, schedule=schedule,
                              reads=isl.UnionMap("[N] -> { S[i, j] -> A[i - 1, j + 1] }"),
                              writes=isl.UnionMap("[N] -> { S[i, j] -> A[i, j] }"))
    assert not tiling.is_permutable(schedule=schedule, band_dims=2, dependences=deps)


def _loops(node: isl.AstNode, depth: int = 0, out=None):
    """(depth, increment) of every for loop of an isl AST."""
    out = [] if out is None else out
    kind = node.get_type()
    if kind == isl.ast_node_type.for_:
        out.append((depth, node.for_get_inc().int_get_val().to_python()))
        _loops(node.for_get_body(), depth + 1, out)
    elif kind == isl.ast_node_type.block:
        children = node.block_get_children()
        for i in range(children.n_ast_node()):
            _loops(children.get_at(i), depth, out)
    elif kind == isl.ast_node_type.if_:
        _loops(node.if_get_then_node(), depth, out)
    return out


def test_tile_schedule_gives_three_tile_loops_of_stride_32_around_three_point_loops():
    tiled = tiling.tile_schedule(isl.UnionMap(IDENTITY), band_dims=3, sizes=(32, 32, 32),
                                 point_order=(0, 2, 1))
    ast = tiling.build_ast(schedule=tiled, domain=isl.UnionSet(GEMM_DOMAIN))
    loops = _loops(ast)
    assert [d for d, _ in loops] == [0, 1, 2, 3, 4, 5]
    assert [inc for _, inc in loops] == [32, 32, 32, 1, 1, 1]


def test_second_level_tiles_wrap_the_first_level():
    tiled = tiling.tile_schedule(isl.UnionMap(IDENTITY), band_dims=3, sizes=(32, 32, 32),
                                 second_level=(128, 128, 128))
    loops = _loops(tiling.build_ast(schedule=tiled, domain=isl.UnionSet(GEMM_DOMAIN)))
    assert [inc for _, inc in loops] == [128, 128, 128, 32, 32, 32, 1, 1, 1]
    with pytest.raises(ValueError):
        tiling.tile_schedule(isl.UnionMap(IDENTITY), band_dims=3, sizes=(32, 32, 32),
                             second_level=(48, 48, 48))


def test_only_statements_keeps_the_named_ones():
    dom = isl.UnionSet("[N] -> { A[i] : 0 <= i < N; B[i] : 0 <= i < N }")
    kept = tiling.only_statements(dom, names=("B",))
    assert kept.is_equal(isl.UnionSet("[N] -> { B[i] : 0 <= i < N }"))


# -- the nest, from C ---------------------------------------------------------------------------------

def first_for(code: str) -> c_ast.For:
    ast = c_parser.CParser().parse(code)
    func = next(e for e in ast.ext if isinstance(e, c_ast.FuncDef))
    return next(s for s in func.body.block_items if isinstance(s, c_ast.For))


IJK = """
void mm(int m, int n, int k, const float *a, const float *b, float *c) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += a[i * k + p] * b[p * n + j];
}
"""


def test_pluto_style_nest_has_six_loops_tile_strides_32_and_j_innermost():
    tiled = tile_nest(first_for(IJK))
    assert tiled.band == ("i", "j", "p")
    assert tiled.point_order == ("i", "p", "j")
    assert tiled.loop_depth == 6
    assert tiled.code.count("+= 32)") == 3 and tiled.code.count("+= 1)") == 3
    # the statement is the nest's own, its variables bound to the new iterators
    assert "c[(i * n) + j] += a[(i * k) + p] * b[(p * n) + j];" in tiled.code


def test_pluto_style_second_level_and_no_intratileopt():
    tiled = tile_nest(first_for(IJK), PlutoOptions(tile=16, second_level=64, intratileopt=False))
    assert tiled.loop_depth == 9
    assert tiled.point_order == ("i", "j", "p")
    assert tiled.code.count("+= 64)") == 3 and tiled.code.count("+= 16)") == 3


def test_column_major_c_puts_i_innermost():
    code = """
void cm(int m, int n, int k, const double *a, const double *b, double *c) {
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++)
            for (int i = 0; i < m; i++)
                c[j * m + i] += a[p * m + i] * b[j * k + p];
}
"""
    assert tile_nest(first_for(code)).point_order[-1] == "i"


def test_a_shared_accumulator_is_not_permutable():
    code = """
float acc;
void dot(int m, int n, int k, const float *a, const float *b, float *c) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }
}
"""
    with pytest.raises(NotApplicable, match="scalar 'acc'"):
        tile_nest(first_for(code))


def test_a_local_accumulator_is_expanded_over_the_loops_around_it():
    tiled = tile_nest(first_for(NESTS["local_accumulator"]))   # numerically: below
    assert tiled.expansions == (("kf_x_acc", "float", ("((m) + 1 - (1))", "((n) - (0))")),)
    assert tiled.band[:2] == ("i", "j")
    assert "kf_x_acc[i - (1)][j] = 0;" in tiled.code
    assert "kf_x_acc[i - (1)][j] += a[" in tiled.code
    assert "c[((i - 1) * n) + j] = 2 * kf_x_acc[i - (1)][j];" in tiled.code


def test_only_scalars_declared_between_the_loops_are_expanded():
    code = """
void rows(int m, int n, int k, const float *a, const float *b, float *c) {
    for (int i = 0; i < m; i++) {
        const float *row = &a[i * k];
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[i * n + j] += row[p] * b[p * n + j];
    }
}
"""
    with pytest.raises(NotApplicable, match="'row' is declared between the loops and is not a "
                                            "scalar"):
        tile_nest(first_for(code))


# -- numerically, against the original ------------------------------------------------------------

NESTS = {
    "ijk": IJK,
    "kji_alpha": """
void mm(int m, int n, int k, float alpha, const float *a, const float *b, float *c) {
    for (int p = 0; p < k; p++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++)
                c[i * n + j] += alpha * a[i * k + p] * b[p * n + j];
}
""",
    "init_then_sum_2d": """
void mm(int n, double C[n][n], const double A[n][n], const double B[n][n]) {
    int i, j, k;
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++) {
            C[i][j] = 0;
            for (k = 0; k < n; k++)
                C[i][j] += A[i][k] * B[k][j];
        }
}
""",
    "local_accumulator": """
void mm(int m, int n, int k, const float *a, const float *b, float *c) {
    for (int i = 1; i <= m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[(i - 1) * k + p] * b[p * n + j];
            c[(i - 1) * n + j] = 2 * acc;
        }
}
""",
    "transposed_b_offsets": """
void mm(int m, int n, int k, int ldb, const float *a, const float *b, float *c) {
    for (int i = 1; i <= m; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < k; p++)
                c[(i - 1) * n + j] += a[(i - 1) * k + p] * b[j * ldb + p];
}
""",
}


def test_pluto_style_bands_come_from_isls_scheduler():
    """The band Pluto-style tiles is the outermost permutable band of isl's (Pluto-like)
    scheduler: the loops without a dependence (coincident) outside the reduction, whatever order
    the nest was written in; the initialization of C is fused into the band."""
    bands = {name: tile_nest(first_for(code)).band for name, code in NESTS.items()}
    assert bands["ijk"] == ("i", "j", "p")
    assert bands["kji_alpha"][2] == "p" and set(bands["kji_alpha"]) == {"i", "j", "p"}
    assert bands["init_then_sum_2d"] == ("i", "j", "k")


@pytest.mark.parametrize("name", sorted(NESTS))
def test_pluto_style_equals_the_original_on_odd_sizes(name, tmp_path):
    source = tmp_path / f"{name}.c"
    source.write_text(NESTS[name])
    options = compare.CompareOptions(path=str(source), pluto=PlutoOptions(tile=32))
    subjects = compare.load_subjects(str(source))
    text = compare.harness(options, subjects)
    original = compare.make_variant("original", options, subjects, str(tmp_path))
    tiled = compare.make_variant("pluto-style", options, subjects, str(tmp_path))
    assert tiled.skipped == {}
    assert "kernelfarer compare, \"pluto-style\"" in tiled.text
    for variant in (original, tiled):
        compare.build(variant, options, text, str(tmp_path))
    for size in (1, 7, 33, 65, 100):
        assert compare.check(tiled, original, 0, subjects[0], size, str(tmp_path)) is None, size


@pytest.mark.parametrize("before", ["c[i * n + j] += acc;",
                                    "for (int q = 0; q < 2; q++) c[i * n + j] += acc;"])
def test_a_name_used_before_the_declaration_it_would_expand_is_refused(before):
    """`acc` before the declaration is the parameter: expanding it too would change the result."""
    code = f"""
void mm(int m, int n, int k, const float *a, const float *b, float *c, float acc) {{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {{
            {before}
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += a[i * k + p] * b[p * n + j];
            c[i * n + j] = acc;
        }}
}}
"""
    with pytest.raises(NotApplicable, match="'acc' is used outside the scope of its declaration"):
        tile_nest(first_for(code))


def test_outer_parallel_is_false_when_the_first_loop_carries_a_dependence():
    schedule = isl.UnionMap("[n] -> { S[i, j] -> [i, j] : 0 <= i, j < n }")
    carried = isl.UnionMap("[n] -> { S[i, j] -> S[i + 1, j] : 0 <= i < n - 1 and 0 <= j < n }")
    inner = isl.UnionMap("[n] -> { S[i, j] -> S[i, j + 1] : 0 <= i < n and 0 <= j < n - 1 }")
    assert not tiling.outer_parallel(schedule=schedule, dependences=carried)
    assert tiling.outer_parallel(schedule=schedule, dependences=inner)
    assert tiling.outer_parallel(schedule=schedule, dependences=isl.UnionMap("{ }"))
