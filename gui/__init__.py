"""The desktop shell (Qt): the main window, the bridge that runs a training session beside the UI, and
the training monitor that docks the panels and routes the session's events to them. Reusable widgets are
in `widgets/`; everything Qt-free is in `app/`."""
