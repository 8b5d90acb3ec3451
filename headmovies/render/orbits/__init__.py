"""The orbit experiment (source 000): orbit check, one pass over a run's snapshots (`stream`),
panel choice, head styles, events and captions, movie, figures, viewer and live view."""
