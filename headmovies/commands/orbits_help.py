"""What `headmovies orbits --help` and its actions' `--help` say (the `orbits` command,
commands/orbits.py): the descriptions, wrapped by hand for an 80-column terminal."""

DESCRIPTION = """\
Orbit analysis of runs of the orbit experiment (or any run of a C_n-symmetric experiment),
from the run files alone:
  check    which heads form orbits of C_n at one snapshot, on the full QK and OV matrices
  watch    the viewer served on 127.0.0.1, following a run while it trains
  census   orbit outcomes across the seeds of one or more sweeps: tables, figure, rows
An orbit run's movie, figures and viewer: `headmovies movie|figures|view RUN` (the old
spellings `headmovies orbits movie|figures|view` still run them, with a notice).
Conventions: docs/math.md; what the movie shows: docs/movie.md; the viewer: docs/viewer.md."""

PANELS_HELP = (
    "default (source 000's four planes if the run's orbits show in them, else chosen from the data), "
    "auto, source (old name: seed), or planes CIRCUIT:U,V such as qk:0,10 ov:10,-10"
)

CHECK = """\
For every shift s, each head h's shifted circuits (T_s M_h T_s^-1, T_ms R_h T_s^-1), with M_h
its centred QK circuit, R_h its centred OV circuit and T_s the permutation of tokens by s, are
matched to the nearest head; a set of heads is a verified orbit when every shift sends each
of its heads onto a head of the set within --tol (relative Frobenius norm, QK and OV each).
Heads with the same centred QK circuit are merged (their OV summed); heads with negligible OV
are dead and set apart.
An orbit whose worst error is within a tenth of --tol of it (1.8-2.2 % at 2 %) is marked
marginal; sets that miss --tol by less than that are listed as near misses (not orbits).
Also prints one line per frequency group: the live heads whose dominant QK frequency is w
(an orbit there has N = n/gcd(w, n) heads). Each line gives the group's orbit spectrum
|mu_k|/sum|rho_h| for k = 1..N-1, with mu_k = sum_h |rho_h| e^(i k phi_h) (all 0 on an exact
orbit). It gives each head's QK score amplitude r and stabiliser-odd fractions. It gives the
within-group match error: the worst error with which a shift sends a head of the group onto
one of the group, for QK and OV. And it says where that mismatch lies: in the group's own
planes (where the spectrum sees it), in the key-independent OV part (what --gauge bias sets
aside) or elsewhere. Group lines are of the default gauge. Definitions and how to read them:
docs/math.md, "Orbit spectrum". The training levers that aim at these (score_scale,
qk_decay, qk_init, frozen_embed, impose_orbit_at; `headmovies train orbits --set KEY=VALUE`)
are in docs/experiments.md, "Levers".
Prints a short text, or JSON with --json. Definition: docs/math.md, "Orbit check"."""

WATCH = """\
Serves the viewer of RUN at http://127.0.0.1:PORT/ and follows the run while it trains
(the SWMR reader): new snapshots appear in the page within about --interval + 1 s, and the
page says "live: epoch N of M". A writer killed and restarted with --resume is followed
into the new file. Waits for RUN if it does not hold a snapshot yet. Ctrl-C stops."""


CENSUS = """\
Reads sweep folders of the orbit experiment (`headmovies sweep orbits --out DIR`), one per
recipe, named by the folder. For every finished run (and every run stopped early with
`sweep --stop-at`, listed apart as a screen) it runs the orbit check on every snapshot and
reads each live head's frequency ω at the screen epochs and at the end. Writes into --out:
  census.jsonl    one row per run (orbits with size, ω, heads, worst error, lock-in epoch;
                  accuracy; both equivariance errors; each head's ω at the screen epochs)
  census.md       outcomes per recipe, every orbit by size and ω, recipes compared seed by
                  seed, and the early screen (do early groups predict the orbits?)
  census.{png,svg}  the same as a figure
  gallery.html    a tile per run: its last snapshot in the planes of its largest frequency
                  groups, orbits coloured as in the movie; filter by recipe and outcome
                  (with --viewers, each run whose file is present gets its viewer in
                  viewers/, linked from its tile)
Rows of unchanged run files are reused from an existing --out/census.jsonl, so a growing
sweep costs only its new runs; its rows of runs that the folders do not list (counted on
another machine, or before the folder was deleted) are kept, so a census continues in fresh
folders on a new machine (same recipe settings and screen epochs). With --rows FILE and no
folders it rebuilds census.md, the figure and the gallery from saved rows alone. A run file
that cannot be read (cut off, corrupt) or is missing is named, its earlier row kept if it has
one, else left out; the command exits 1 after writing the rest: rerun the sweep to retrain it.
Docs: docs/results/orbits.md, "Census"."""
