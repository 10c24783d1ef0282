def test_every_configuration_the_benchmark_runs_exists():
    """The GPU run stopped at once on 2026-12-01: ORDER named a configuration that was never defined."""
    from helpers.decoder import bench
    from helpers.decoder.configurations import CONFIGURATIONS

    assert set(bench.ORDER) <= set(CONFIGURATIONS), sorted(set(bench.ORDER) - set(CONFIGURATIONS))
    assert set(bench.QUICK) <= set(CONFIGURATIONS)
