"""The Play section: a person plans a task by hand, with the same tools and checks a model has (section.py, the plan
table in plan_table.py); the same for scripts (api.py)."""
