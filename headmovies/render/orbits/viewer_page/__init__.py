"""The viewer's page (docs/viewer.md): viewer.html (markup), viewer.css and the scripts it names,
one job each, which `build.page` inlines into one self-contained HTML file with the payload."""
