"""The `headmovies` commands, one module each (listed in `headmovies.cli.COMMANDS`): shared ones
(`train`, `sweep`, `recover`) and one per experiment family (`orbits`, `induction`,
`ov_coherent`). A command parses, calls library functions and prints; it imports them only
when it runs, so `--help` loads neither torch nor the renderer."""
