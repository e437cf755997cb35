-- fts5 tables in the schema's own tables, as SQLite lists them: sqlite_schema has a row of
-- type 'table', rootpage 0 and the CREATE VIRTUAL TABLE text; pragma_table_info gives the
-- declared columns, untyped and outside any key; pragma_table_xinfo adds the hidden ones.
-- SQLite's shadow tables (t_data, t_idx, t_content, t_docsize, t_config) have no counterpart
-- in cairn, whose index is two trees no statement reads as tables (docs/sql.md), so every
-- query here leaves them out by name. (Every statement after the ordinary tables is one the
-- build's split profile leaves out, scripts/corpus.mjs: full-text search stays in the rest.)
CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT, body TEXT);
CREATE INDEX todo_title ON todo (title);
CREATE VIRTUAL TABLE ft USING fts5(a, b UNINDEXED);
CREATE VIRTUAL TABLE todo_fts USING fts5(title, body, content='todo', content_rowid='id');
CREATE VIRTUAL TABLE later USING fts5(k);
CREATE VIRTUAL TABLE IF NOT EXISTS "Mixed Case" USING fts5(x);
SELECT type, name, tbl_name, rootpage = 0, sql IS NULL, sql LIKE 'CREATE VIRTUAL TABLE %USING fts5(%' FROM sqlite_schema WHERE name NOT IN ('ft_data', 'ft_idx', 'ft_content', 'ft_docsize', 'ft_config', 'todo_fts_data', 'todo_fts_idx', 'todo_fts_docsize', 'todo_fts_config', 'later_data', 'later_idx', 'later_content', 'later_docsize', 'later_config', 'Mixed Case_data', 'Mixed Case_idx', 'Mixed Case_content', 'Mixed Case_docsize', 'Mixed Case_config');
SELECT name FROM sqlite_master WHERE rootpage = 0 ORDER BY name;
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND sql LIKE '%content=''todo''%';
SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' ORDER BY name;
PRAGMA table_info(ft);
PRAGMA table_info(todo_fts);
PRAGMA table_xinfo(ft);
PRAGMA table_xinfo("Mixed Case");
PRAGMA index_list(ft);
PRAGMA index_list(todo_fts);
PRAGMA foreign_key_list(ft);
SELECT * FROM pragma_table_info('TODO_FTS') ORDER BY cid;
SELECT * FROM pragma_table_xinfo('todo_fts') ORDER BY cid;
SELECT m.name, p.cid, p.name, p.type, p.pk FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' AND m.rootpage = 0 ORDER BY m.name, p.cid;
-- Kysely's introspector, its parameters inlined, shadow tables left out.
with "table_list" as (select "name", "sql", "type" from "sqlite_master" where "type" in ('table', 'view') and "name" not like 'sqlite_%' and "name" not like '%\_data' escape '\' and "name" not like '%\_idx' escape '\' and "name" not like '%\_content' escape '\' and "name" not like '%\_docsize' escape '\' and "name" not like '%\_config' escape '\' order by "name") select "tl"."name" as "table", "p"."cid", "p"."name", "p"."type", "p"."notnull", "p"."dflt_value", "p"."pk" from "table_list" as "tl", pragma_table_info(tl.name) as "p" order by "tl"."name", "p"."cid";
