"""Interactive calculators (ipywidgets), thin layers over servelib's pure functions.

One module per chapter topic; each calculator also has a static figure or table in the
chapter so the HTML book is never blank where a widget would be.
"""
