"""The sequence term's autograd Function (train/orbits/seq_attention.py) beyond one forward and one
backward per training step: a term evaluated under torch.inference_mode, a second backward through
a retained graph and a gradient of a gradient (create_graph) each give what the plain form
(`seq_eq_loss_indexed`, autograd through advanced indexing and a one-hot product) gives."""

from __future__ import annotations

import torch

from headmovies.train.orbits.losses import seq_eq_loss, seq_eq_loss_indexed

n, H, B, L = 12, 6, 4, 5  # a token four times in the first sequence: summation orders would show


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(3)
    M0, R0 = torch.randn(H, n, n, generator=g, dtype=dtype), torch.randn(H, n, n, generator=g, dtype=dtype)
    x = torch.randint(0, n, (B, L), generator=g)
    x[0] = torch.tensor([5, 5, 2, 5, 5])
    return M0, R0, x


def _grads(f, M0, R0, x):
    M, R = M0.clone().requires_grad_(), R0.clone().requires_grad_()
    f(M, R, x).backward()
    return M.grad, R.grad


def test_a_term_under_inference_mode_leaves_the_next_training_step_its_gradients():
    """A term evaluated under torch.inference_mode (a check, a user's evaluation) makes its
    buffers there; a training step after it must not get them (an inference tensor cannot be
    written outside inference mode), and keeps the plain form's gradients to the bit."""
    M0, R0, x = _inputs()
    with torch.inference_mode():
        inferred = seq_eq_loss(M0, R0, x)
    assert float(inferred) > 0.01
    for _ in range(2):  # the step that would take the buffers, and one after it
        got = _grads(seq_eq_loss, M0, R0, x)
        ref = _grads(seq_eq_loss_indexed, M0, R0, x)
        assert all(torch.equal(a, b) for a, b in zip(got, ref))
        assert float(got[0].abs().max()) > 0
    with torch.no_grad():
        assert torch.equal(seq_eq_loss(M0, R0, x), inferred)


def test_a_second_backward_through_a_retained_graph_adds_the_same_gradients():
    """loss.backward(retain_graph=True) then loss.backward(): twice the gradients, as the plain
    form gives, with other terms run between the two backwards (they reuse the buffers)."""
    M0, R0, x = _inputs()
    ref = _grads(seq_eq_loss_indexed, M0, R0, x)
    M, R = M0.clone().requires_grad_(), R0.clone().requires_grad_()
    loss = seq_eq_loss(M, R, x)
    loss.backward(retain_graph=True)
    assert torch.equal(M.grad, ref[0]) and torch.equal(R.grad, ref[1])
    other = _grads(seq_eq_loss, M0 * 2, R0, x.flip(0))  # takes and gives back the same shapes
    assert not torch.equal(other[0], ref[0])
    loss.backward()
    assert torch.equal(M.grad, ref[0] + ref[0]) and torch.equal(R.grad, ref[1] + ref[1])


def test_a_gradient_of_the_gradient_is_the_plain_forms():
    """create_graph=True (a gradient penalty): the first gradients to the bit, and the gradient of
    their squared norm as the plain form's (float64, to 1e-12 relative: another summation order)."""
    M0, R0, x = _inputs(torch.float64)
    out = []
    for f in (seq_eq_loss, seq_eq_loss_indexed):
        M, R = M0.clone().requires_grad_(), R0.clone().requires_grad_()
        dM, dR = torch.autograd.grad(f(M, R, x), (M, R), create_graph=True)
        ddM, ddR = torch.autograd.grad(dM.pow(2).sum() + dR.pow(2).sum(), (M, R))
        out.append((dM.detach(), dR.detach(), ddM, ddR))
    (dM, dR, ddM, ddR), ref = out
    assert torch.equal(dM, ref[0]) and torch.equal(dR, ref[1])
    assert float(ddM.abs().max()) > 1e-3 and float(ddR.abs().max()) > 1e-3
    torch.testing.assert_close(ddM, ref[2], rtol=1e-12, atol=1e-12 * float(ref[2].abs().max()))
    torch.testing.assert_close(ddR, ref[3], rtol=1e-12, atol=1e-12 * float(ref[3].abs().max()))
    # only one input needing its gradient: the other gets none
    M = M0.clone().requires_grad_()
    (dM_only,) = torch.autograd.grad(seq_eq_loss(M, R0, x), (M,), create_graph=True)
    assert torch.equal(dM_only.detach(), ref[0])
