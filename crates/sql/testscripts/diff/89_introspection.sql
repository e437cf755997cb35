-- What ORMs and schema tools read: sqlite_schema, the pragma functions and the PRAGMA
-- statements, over keys of each kind, UNIQUE constraints, indexes, NOT NULL and defaults.
-- The stored CREATE text is cairn's own (docs/sql.md), so sqlite_schema's sql column is
-- compared for NULL here (and as a definition in differential.rs), and rootpage not at all.
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, name TEXT DEFAULT 'anon', score REAL DEFAULT 0.5, created INT NOT NULL DEFAULT (1 + 2));
CREATE TABLE memberships (user_id INTEGER NOT NULL, org TEXT NOT NULL, role TEXT DEFAULT 'member' CHECK (role <> ''), since INT, PRIMARY KEY (user_id, org), UNIQUE (org, role, since));
CREATE TABLE tags (name TEXT PRIMARY KEY, color TEXT UNIQUE, weight INT DEFAULT -1, note ANY, UNIQUE (weight, color));
CREATE TABLE log (at INT, msg TEXT, level INT DEFAULT +3);
CREATE TABLE pk_late (a INT, b TEXT UNIQUE, c INT, UNIQUE (c), PRIMARY KEY (a), UNIQUE (b, c));
CREATE TABLE pk_int_desc (id INTEGER PRIMARY KEY DESC, v TEXT);
CREATE TABLE dup_unique (a INT UNIQUE, b INT, UNIQUE (a), UNIQUE (a, b), UNIQUE (a, b));
CREATE INDEX users_name ON users (name);
CREATE UNIQUE INDEX log_at_msg ON log (at, msg);
CREATE INDEX memberships_since ON memberships (since, role);
CREATE INDEX tags_note ON tags (note);
SELECT type, name, tbl_name, sql IS NULL FROM sqlite_schema;
SELECT type, name, tbl_name, sql IS NULL FROM sqlite_master WHERE type = 'index' ORDER BY name;
SELECT count(*) FROM sqlite_schema WHERE rootpage > 0;
SELECT * FROM sqlite_temp_schema;
SELECT sqlite_master.name FROM sqlite_master WHERE sqlite_master.type = 'table' ORDER BY 1;
PRAGMA table_info(users);
PRAGMA table_info('memberships');
PRAGMA table_info("tags");
PRAGMA table_info(LOG);
PRAGMA main.table_info(pk_late);
PRAGMA table_info = pk_int_desc;
PRAGMA table_info(nosuch);
PRAGMA table_info;
PRAGMA table_xinfo(memberships);
PRAGMA index_list(users);
PRAGMA index_list(memberships);
PRAGMA index_list(tags);
PRAGMA index_list(log);
PRAGMA index_list(pk_late);
PRAGMA index_list(pk_int_desc);
PRAGMA index_list(dup_unique);
PRAGMA index_list(users_name);
PRAGMA index_info(users_name);
PRAGMA index_info(sqlite_autoindex_users_1);
PRAGMA index_info(sqlite_autoindex_memberships_1);
PRAGMA index_info(sqlite_autoindex_memberships_2);
PRAGMA index_info(sqlite_autoindex_tags_1);
PRAGMA index_info(sqlite_autoindex_tags_3);
PRAGMA index_info(sqlite_autoindex_pk_late_3);
PRAGMA index_info(memberships_since);
PRAGMA index_info(users);
PRAGMA index_info(nosuch);
PRAGMA index_xinfo(log_at_msg);
PRAGMA index_xinfo(sqlite_autoindex_memberships_1);
PRAGMA foreign_key_list(users);
SELECT * FROM pragma_table_info('users') ORDER BY cid;
SELECT name, pk FROM pragma_table_info('MEMBERSHIPS') WHERE pk > 0 ORDER BY pk;
SELECT name, "notnull", dflt_value FROM pragma_table_info('tags', 'main') ORDER BY cid;
SELECT count(*) FROM pragma_table_info('tags', 'temp');
SELECT cid, name FROM pragma_table_info(NULL);
SELECT * FROM pragma_index_list('tags') ORDER BY seq;
SELECT p.name, p.type FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY m.name, p.cid;
SELECT m.name, count(il.name) FROM sqlite_master m LEFT JOIN pragma_index_list(m.name) il GROUP BY m.name ORDER BY 1;
SELECT m.name, (SELECT count(*) FROM pragma_table_info(m.name)) FROM sqlite_master m ORDER BY 1;
SELECT il.name, ii.seqno, ii.name FROM pragma_index_list('memberships') il JOIN pragma_index_info(il.name) ii ORDER BY il.seq, ii.seqno;
SELECT * FROM pragma_table_info('users', 'main', 'x');
SELECT * FROM pragma_nosuch('users');
-- Kysely's introspector (SqliteIntrospector#getTableMetadata), with its parameters inlined.
select "name", "sql" IS NULL, "type" from "sqlite_master" where "type" in ('table', 'view') and "name" not like 'sqlite_%' and "name" != 'kysely_migration' and "name" != 'kysely_migration_lock' order by "name";
with "table_list" as (select "name", "sql", "type" from "sqlite_master" where "type" in ('table', 'view') and "name" not like 'sqlite_%' and "name" != 'kysely_migration' and "name" != 'kysely_migration_lock' order by "name") select "tl"."name" as "table", "p"."cid", "p"."name", "p"."type", "p"."notnull", "p"."dflt_value", "p"."pk" from "table_list" as "tl", pragma_table_info(tl.name) as "p" order by "tl"."name", "p"."cid";
-- drizzle-kit's SQLite introspection (fromDatabase), as it sends it.
SELECT 
		  m.name as "tableName",
		  p.name as "columnName",
		  p.type as "columnType",
		  p."notnull" as "notNull",
		  p.dflt_value as "defaultValue",
		  p.pk as pk,
		  p.hidden as hidden,
		  m.sql IS NULL,
		  m.type as type
		FROM sqlite_master AS m
		JOIN pragma_table_xinfo(m.name) AS p
		WHERE (m.type = 'table' OR m.type = 'view') 
		  AND m.tbl_name != '__drizzle_migrations'
			AND m.tbl_name NOT LIKE '\_cf\_%' ESCAPE '\'
			AND m.tbl_name NOT LIKE '\_litestream\_%' ESCAPE '\'
			AND m.tbl_name NOT LIKE 'libsql\_%' ESCAPE '\'
			AND m.tbl_name NOT LIKE 'sqlite\_%' ESCAPE '\';
SELECT
		  *
		FROM sqlite_master
		WHERE sql GLOB '*[ *' || CHAR(9) || CHAR(10) || CHAR(13) || ']AUTOINCREMENT[^'']*'
    	  AND tbl_name != '__drizzle_migrations';
SELECT
			  m.name as "tableFrom",
			  f.id as "id",
			  f."table" as "tableTo",
			  f."from",
			  f."to",
			  f."on_update" as "onUpdate",
			  f."on_delete" as "onDelete",
			  f.seq as "seq"
      		FROM
			  sqlite_master m,
			  pragma_foreign_key_list(m.name) as f
      		WHERE m.tbl_name != '__drizzle_migrations';
SELECT 
    	  m.tbl_name as tableName,
    	  il.name as indexName,
    	  ii.name as columnName,
    	  il.[unique] as isUnique,
    	  il.seq as seq
		FROM 
		  sqlite_master AS m,
    	  pragma_index_list(m.name) AS il,
    	  pragma_index_info(il.name) AS ii
		WHERE 
		  m.type = 'table' 
    	  AND il.name NOT LIKE 'sqlite\_autoindex\_%' ESCAPE '\'
    	  AND m.tbl_name != '__drizzle_migrations';
SELECT name AS view_name, sql AS sql FROM sqlite_master WHERE type = 'view';
SELECT
		  name as "tableName"
		FROM sqlite_master 
		WHERE type = 'table'
		  AND tbl_name != '__drizzle_migrations';
-- Plans that read the schema are made again when it changes.
DROP INDEX users_name;
ALTER TABLE log ADD COLUMN extra TEXT DEFAULT 'e';
PRAGMA index_list(users);
PRAGMA table_info(log);
DROP TABLE dup_unique;
SELECT type, name, tbl_name FROM sqlite_schema WHERE tbl_name = 'dup_unique';
-- The schema's tables are read-only, and their names are SQLite's own.
INSERT INTO sqlite_schema VALUES ('table', 'x', 'x', 0, NULL);
CREATE TABLE sqlite_mine (a INT);
CREATE INDEX sqlite_mine ON users (name);
CREATE INDEX SQLITE_autoindex_users_9 ON users (name);
-- PRAGMA user_version: read, set as SQLite reads the value, undone by a rollback.
PRAGMA user_version;
SELECT * FROM pragma_user_version;
PRAGMA user_version = 7;
PRAGMA user_version;
PRAGMA main.user_version = '9';
PRAGMA user_version;
PRAGMA user_version(-3);
SELECT user_version + 1 FROM pragma_user_version;
PRAGMA user_version = 4294967297;
PRAGMA user_version;
PRAGMA user_version = 2147483647;
PRAGMA user_version;
PRAGMA user_version = 1.9;
PRAGMA user_version;
PRAGMA user_version = abc;
PRAGMA user_version;
PRAGMA user_version = 0x10;
PRAGMA user_version;
BEGIN;
PRAGMA user_version = 5;
PRAGMA user_version;
ROLLBACK;
PRAGMA user_version;
BEGIN;
PRAGMA user_version = 6;
COMMIT;
PRAGMA user_version;
PRAGMA nosuch_pragma;
PRAGMA nosuch_pragma = 3;
PRAGMA other.user_version;
