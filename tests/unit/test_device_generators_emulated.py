"""``torch.Generator(device=<the device>)`` on the emulated DirectML device (re-probe 22, case 19; the prediction's
tests are in test_device_generators.py: the two devices do not share a process)."""
import torch


def test_on_the_emulated_device_a_device_generator_draws_the_cpus_values_as_torch_directmls(emulated_dml_backend):
    """realdml: ``torch.Generator(device=dml)`` is a CPU generator whose device draws equal the CPU's (seeded alike),
    its state a CPU generator's (``get_state``/``set_state`` replay the draws)."""
    device = emulated_dml_backend.device()
    with emulated_dml_backend.run_context():
        generator = torch.Generator(device=device).manual_seed(1)
        drawn = torch.randn(3, device=device, generator=generator)
        state = generator.get_state()
        again = torch.rand(2, device=device, generator=generator)
        generator.set_state(state)
        replayed = torch.rand(2, device=device, generator=generator)
        unseeded = torch.Generator(device=device)
        unseeded_draw = torch.randn(3, device=device, generator=unseeded)
    assert unseeded.initial_seed() == 0  # as torch-directml's (measured)
    assert torch.equal(unseeded_draw.cpu(), torch.randn(3, generator=torch.Generator().manual_seed(0)))
    assert generator.device == torch.device("cpu") and drawn.device == device
    assert torch.equal(drawn.cpu(), torch.randn(3, generator=torch.Generator().manual_seed(1)))
    assert torch.equal(again.cpu(), replayed.cpu())
