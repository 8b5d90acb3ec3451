"""The orbit family of the viewer engine (docs/viewer.md, "The page"): its scripts, in the order
they run (they take the place of the engine's family.js tag), and family.css."""

SCRIPTS = ["planes.js", "snapshots.js", "heads.js", "groups.js", "live.js", "family.js"]
