"""What `headmovies orbits --help` and its actions' `--help` say (the `orbits` command,
commands/orbits.py): the descriptions, wrapped by hand for an 80-column terminal."""

from headmovies.render.core.movie_options import FORMATS

DESCRIPTION = """\
Outputs of a run of the orbit experiment (or any run of a C_n-symmetric experiment), from the
run file alone:
  check    which heads form orbits of C_n at one snapshot, on the full QK and OV matrices
  movie    the movie: heads as trailing dots in irrep planes of their QK and OV circuits
  figures  still figures for posts (curves, final panels, orbit check, Fourier power)
  view     the interactive viewer: one self-contained HTML page to scrub through the run
  watch    the viewer served on 127.0.0.1, following a run while it trains
  census   orbit outcomes across the seeds of one or more sweeps: tables, figure, rows
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

MOVIE = f"""\
One frame per snapshot, one dot per head at its irrep coordinate X^(u,v) in each panel,
trailing its last --trail epochs; axes rescale smoothly to the largest radius in view; the last
frame is held --hold seconds. The orbit check runs on every snapshot: a head is drawn in its
orbit's colour (and the orbit's polygon outlined) only from the snapshot at which the orbit
is verified, grey like any other live head before; dead heads are small light-grey dots. A
timeline strip right of the panels (--layout wide, landscape, the default) or under them
(--layout tall, portrait) shows epochs, the schedule switch, phase changes and each
verification, nothing after the frame's epoch; the frame is held --event-hold seconds at
phase changes and verifications.

Panels are CIRCUIT:U,V with CIRCUIT qk (rotation frequency ω = u+v) or ov (ω = m*u+v, u the
output frequency); an orbit draws a regular polygon with n/gcd(ω, n) vertices. --panels
default keeps source 000's four (qk:0,10 ov:10,-10 qk:0,6 ov:6,-6) when the orbits show in
them, else picks, for the two largest orbits, the planes where they carry the most power,
then fills up to four panels with the strongest QK planes of all live heads, each with an OV
plane of the same polygon order. auto always picks; source always draws source 000's four.

Writes DIR/NAME.{{{",".join(FORMATS)}}} (those in --formats): H.264 MP4 (+faststart), VP9
WebM, looping GIF, poster PNG (last frame) and an HTML snippet (<figure>: <video> with
controls, MP4 first, no autoplay under prefers-reduced-motion, and a <figcaption> text
alternative). Files appear only when complete."""

FIGURES = """\
Writes into DIR:
  curves.{png,svg}            loss, accuracy and both equivariance errors over epochs
  panels.{png,svg}            the movie's panels at the final epoch (orbit colours, trails)
  orbit_check.{png,svg}       match error of every head under every shift (final snapshot)
  orbit_power.{png,svg}       Fourier power of each orbit's QK and OV circuits per (u, v)
  orbits_over_time.{png,svg}  heads in verified orbits at each snapshot
  orbit_progress.{png,svg}    each head's distance to an orbit over epochs, heads in orbits,
                              and when each orbit locks in
  orbits.json, orbits.txt     the orbit report of the final snapshot"""

VIEW = """\
Writes DIR/NAME.html (default viewer.html): one self-contained page, plain JavaScript and
canvas, no network; it opens from file:// offline. Play/pause and a scrubber over epochs;
the movie's panels (--panels as for the movie) plus any (circuit, u, v) plane chosen in the
page; trails; a timeline with the schedule switch, the second phase and each orbit's
verification; hovering or clicking a head shows its id, orbit, worst-shift match error and
heatmaps of its centred QK and OV circuits at that epoch. Colours follow the orbit check of
every snapshot: a head is drawn in an orbit's colour only where the check verifies it.
Details: docs/viewer.md."""

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
