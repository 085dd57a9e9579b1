mod limits;
mod web;
