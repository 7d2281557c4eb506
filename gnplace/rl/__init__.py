"""Reinforcement learning of placements: the placement MDP, PPO, REINFORCE, imitation and the search placers.

Importing this package imports torch and torch-geometric; ``import gnplace`` never does.
"""
