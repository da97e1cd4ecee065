"""Arrays through DLPack (the module's own reader of the __dlpack__ protocol):
every dtype and layout a producer may hand over gives the numbers of the same
values as float64 NumPy arrays, bit for bit; the capsule is consumed once; a
CUDA tensor without a GPU build or a GPU is a one-line ValueError; on a GPU,
torch CUDA tensors and the GPU paths (the lead runs these: they skip here)."""
import gc
import weakref

import numpy as np
import pytest

import chunkinv


class Producer:
    """A tensor reached through DLPack only (no __array__, no buffer), as a torch tensor is to the module.
    ``device`` fakes the device __dlpack_device__ reports (the data stay NumPy's)."""

    def __init__(self, a, device=None):
        self.a, self.device, self.exports = a, device, 0

    def __dlpack__(self, stream=None):
        self.exports += 1
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.device or self.a.__dlpack_device__()

    @property
    def shape(self):
        return self.a.shape

    def __getitem__(self, index):
        return Producer(self.a[index], self.device)


def same_bits(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


def batch(seed=0, n=3, c=16, d=32):
    rng = np.random.default_rng(seed)
    keys = rng.standard_normal((n, c, d))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    return keys, -rng.uniform(0.05, 2.0, (n, c)), rng.uniform(0.1, 0.9, (n, c))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_every_float_dtype_reads_as_its_exact_values(dtype):
    keys, g, beta = (x.astype(dtype) for x in batch())
    want = chunkinv.inverse(keys.astype(np.float64), g.astype(np.float64), beta.astype(np.float64), path="emulated")
    got = chunkinv.inverse(Producer(keys), Producer(g), Producer(beta), path="emulated")
    for name in ("L", "INV"):
        assert same_bits(got[name], want[name]), name


def test_strided_and_reversed_views_are_read_where_they_lie():
    keys, g, beta = batch(1, n=4)
    want = chunkinv.gold(keys[::2], g[::2], beta[::2])["INV"]
    # Every other sample (a stride of two samples), a transposed copy read back through its strides.
    assert same_bits(chunkinv.gold(Producer(keys[::2]), Producer(g[::2]), Producer(beta[::2]))["INV"], want)
    kt = np.ascontiguousarray(keys[::2].transpose(2, 1, 0)).transpose(2, 1, 0)  # Fortran-ordered values
    assert not kt.flags.c_contiguous
    assert same_bits(chunkinv.gold(Producer(kt), g[::2], beta[::2])["INV"], want)
    flipped = chunkinv.gold(Producer(keys[::-1]), Producer(g[::-1]), Producer(beta[::-1]))["INV"]
    assert same_bits(flipped, chunkinv.gold(keys[::-1].copy(), g[::-1].copy(), beta[::-1].copy())["INV"])


def test_integer_cu_seqlens_and_a_single_sample_through_dlpack():
    rng = np.random.default_rng(2)
    keys, g, beta = rng.standard_normal((1, 40, 2, 16)), -rng.uniform(0.01, 1, (1, 40, 2)), rng.uniform(0.1, 0.9, (1, 40, 2))
    for dtype in (np.int32, np.int64):
        cu = np.array([0, 13, 40], dtype=dtype)
        got = chunkinv.chunked(Producer(keys), Producer(g), Producer(beta), cu_seqlens=Producer(cu), chunk=16)
        assert got["chunks"][:, 3].tolist() == [13, 13, 16, 16, 11, 11]
    k1, g1, b1 = batch(3)
    one = chunkinv.gold(Producer(k1[0]), Producer(g1[0]), Producer(b1[0]))["INV"]
    assert same_bits(one[0], chunkinv.gold(k1, g1, b1)["INV"][0])


def test_scored_candidates_come_through_dlpack_too():
    keys, g, beta = batch(4)
    emu = chunkinv.inverse(keys, g, beta, path="emulated", method="neumann")
    want = chunkinv.score(emu["INV"], keys, g, beta, L=emu["L"], method="neumann")["metrics"]
    got = chunkinv.score(Producer(emu["INV"].astype(np.float32)), keys, g, beta, L=Producer(emu["L"]),
                         method="neumann")["metrics"]
    # The FP16 INV is exact in FP32, so the scores are the same bits.
    assert same_bits(got["inv_total_rel_rmse"], want["inv_total_rel_rmse"])
    with pytest.raises(ValueError, match=r"inv: shape \(3, 16\) is not \[N, C, C\]"):
        chunkinv.score(Producer(emu["INV"][:, 0]), keys, g, beta)


def test_the_capsule_is_consumed_once_and_released():
    keys, g, beta = batch(5)
    p = Producer(keys)
    chunkinv.gold(p, g, beta)
    assert p.exports == 1
    # The exporter's deleter ran: nothing keeps the array alive but us.
    a = np.array(keys)
    ref = weakref.ref(a)
    chunkinv.gold(Producer(a), g, beta)
    del a
    gc.collect()
    assert ref() is None


def test_unreadable_dtypes_and_devices_are_value_errors():
    keys, g, beta = batch(6)
    with pytest.raises(ValueError, match=r"arrays\[keys\]: DLPack dtype \(code 5, 128 bits"):
        chunkinv.gold(Producer(keys.astype(np.complex128)), g, beta)
    with pytest.raises(ValueError, match=r"arrays\[g\]: DLPack device type 4 is neither the CPU nor a CUDA GPU"):
        chunkinv.gold(keys, Producer(g, device=(4, 0)), beta)


def test_a_cuda_tensor_without_a_gpu_says_why():
    gpu = next(p for p in chunkinv.paths() if p["name"] == "kernel")
    if not gpu["unavailable"]:
        pytest.skip("a GPU is here: test_torch_cuda_tensors_and_the_gpu_paths covers CUDA tensors")
    keys, g, beta = batch(7)
    with pytest.raises(ValueError, match=r"^arrays\[keys\]: a CUDA tensor, and (no usable GPU here|this chunkinv was built without CUDA)"):
        chunkinv.gold(Producer(keys, device=(2, 0)), g, beta)
    with pytest.raises(ValueError, match=r"^path kernel needs a CUDA GPU: "):
        chunkinv.inverse(keys, g, beta, path="kernel")


def test_torch_cuda_tensors_and_the_gpu_paths():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU for torch")
    if next(p for p in chunkinv.paths() if p["name"] == "kernel")["unavailable"]:
        pytest.skip("this chunkinv has no usable GPU path")
    keys, g, beta = batch(8, n=8, c=32, d=64)
    tk = torch.tensor(keys, dtype=torch.bfloat16, device="cuda")
    tg = torch.tensor(g, dtype=torch.float32, device="cuda")
    tb = torch.tensor(beta, dtype=torch.float32, device="cuda").requires_grad_()
    host = (tk.float().cpu().numpy().astype(np.float64), tg.cpu().numpy().astype(np.float64),
            tb.detach().cpu().numpy().astype(np.float64))
    assert same_bits(chunkinv.gold(tk, tg, tb)["INV"], chunkinv.gold(*host)["INV"])
    # The GPU path equals the emulated one bit for bit (README), from CUDA tensors as from NumPy.
    kern = chunkinv.inverse(tk, tg, tb, path="kernel", method="neumann")
    emu = chunkinv.inverse(*host, path="emulated", method="neumann")
    assert same_bits(kern["INV"], emu["INV"])
    assert same_bits(kern["L"], emu["L"])
    chunkinv.testing.assert_inverse_close(torch.tensor(kern["INV"], device="cuda"), tk, tg, tb, rel_rmse=1e-2)
    # The layer's output check from CUDA tensors (fla's layout, BF16): the same FP64 recurrence as from NumPy.
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((1, 64, 2, 16)) for _ in range(3))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    gs = -0.5 / (1 + np.exp(-rng.standard_normal((1, 64, 2, 16))))
    bs = 1 / (1 + np.exp(-rng.standard_normal((1, 64, 2))))
    cuda = [torch.tensor(x, dtype=torch.bfloat16, device="cuda") for x in (q, k, v)]
    cuda += [torch.tensor(gs, dtype=torch.float32, device="cuda"), torch.tensor(bs, dtype=torch.float32, device="cuda")]
    host = [x.float().cpu().numpy().astype(np.float64) for x in cuda]
    ref = chunkinv.recurrence(*cuda)
    assert same_bits(ref["o"], chunkinv.recurrence(*host)["o"])
    chunkinv.testing.assert_output_close(torch.tensor(ref["o"], device="cuda"), *cuda, rel_rmse=0.0)
    # And the gradient check from CUDA tensors: the same FP64 gradients as from NumPy.
    do = torch.tensor(rng.standard_normal((1, 64, 2, 16)), dtype=torch.bfloat16, device="cuda")
    grads = chunkinv.recurrence_backward(*cuda, do)
    assert same_bits(grads["dk"], chunkinv.recurrence_backward(*host, do.float().cpu().numpy().astype(np.float64))["dk"])
    chunkinv.testing.assert_gradients_close({n: torch.tensor(grads[n], device="cuda") for n in ("dq", "dk", "dg")},
                                            *cuda, do, rel_rmse=0.0)
