"""The cluster simulator (`slotmap simulate`): the planner against static and HPA-style
baselines in virtual time. A program of its own beside the manager service, which never
imports it."""
