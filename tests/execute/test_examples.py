import torch

from gnplace.execute import examples


def test_factories_return_a_module_whose_output_is_a_scalar_loss_and_are_reproducible():
    for factory in (examples.tiny, examples.mlp, examples.convnet, examples.branchy):
        module, inputs = factory()
        loss = module(*inputs)
        assert loss.ndim == 0
        again, inputs_again = factory()
        torch.testing.assert_close(again(*inputs_again), loss)
