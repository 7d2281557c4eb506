import torch

from gnplace.execute import examples


def test_factories_return_a_module_whose_output_is_a_scalar_loss_and_are_reproducible():
    for factory in (examples.tiny, examples.mlp, examples.convnet, examples.branchy):
        module, inputs = factory()
        loss = module(*inputs)
        assert loss.ndim == 0
        again, inputs_again = factory()
        torch.testing.assert_close(again(*inputs_again), loss)


def test_factories_leave_the_callers_global_generator_where_it_was():
    for factory in (examples.tiny, examples.mlp, examples.convnet, examples.branchy, examples.transformer):
        torch.manual_seed(1234)
        torch.rand(3)  # the caller's stream, part-way through
        state = torch.random.get_rng_state()
        factory()
        assert torch.initial_seed() == 1234, factory.__name__  # torch.manual_seed(0) reseeded it
        assert torch.equal(torch.random.get_rng_state(), state), factory.__name__
