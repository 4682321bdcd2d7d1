"""The queries, one module per table family.

Services ask these modules for rows and hand them back; SQLAlchemy statements
on the bot's tables live here, so a change to a table touches one place.
"""
