"""A small LangGraph app in a package, whose marks discovery reads from source: the builder in
`graph`, its nodes in `nodes` and `review`, and a module it never imports (`unused`). Its
prompt names are its own: at run time the whole `tests` package is one app to the marks."""
