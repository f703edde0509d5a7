"""radstack"""
