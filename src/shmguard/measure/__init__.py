"""Running commands under limits and measuring them: sandbox, sampler, probe."""
