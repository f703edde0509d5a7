"""realtime"""
