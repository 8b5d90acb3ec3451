"""The census gallery's page (docs/sweeps.md, "Census gallery"): gallery.html (markup),
gallery.css and the scripts it names, one job each, which `build.page` inlines into one
self-contained HTML file with the payload (`sweeps.census_gallery`)."""
