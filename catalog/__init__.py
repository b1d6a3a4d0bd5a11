"""The task catalog: the tasks a user can pick, from the embedded pack or a server's Task API, the tasks dataset and its verdicts."""
