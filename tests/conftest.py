"""Shared test set-up: Qt runs offscreen, and the engine's RNG is reseeded per test."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
